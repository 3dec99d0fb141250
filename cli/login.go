package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/client"
	"github.com/gpuportal/gpuportal/core/buildinfo"
	"github.com/spf13/cobra"
)

// loginCommand is "gpuportal login": it checks a server and the user's
// credentials against it, and saves the server and an API token as a
// context in the config file, the current one from then on.
func (c jobCmd) loginCommand() *cobra.Command {
	f := c.command("login [SERVER] [flags]", "log in to a server and save it as a context")
	f.fs.StringVar(&f.server, "server", "", "the portal's URL (default: the context's server, else $"+jobServerEnv+", else the current context's; asked when there is none)")
	c.contextFlag(f, "save the login as this context (default: the context of this server, else its host name)")
	user := f.fs.String("user", "", "log in with this user name and its password (asked when neither --user nor --token-stdin is given)")
	passwordStdin := f.fs.Bool("password-stdin", false, "with --user: read the password from standard input")
	tokenStdin := f.fs.Bool("token-stdin", false, "read an API token from standard input instead of logging in with a password")
	return f.run(func(ctx context.Context, pos []string) (err error) {
		defer wrapCmdErr("login", &err)
		switch {
		case len(pos) > 1:
			return fmt.Errorf("unexpected argument %q", pos[1])
		case len(pos) == 1 && f.server != "":
			return fmt.Errorf("give the server once: as --server or as the argument %q", pos[0])
		case len(pos) == 1:
			f.server = pos[0]
		}
		if *tokenStdin && (*passwordStdin || *user != "") {
			return errors.New("--token-stdin logs in with a token: leave out --user and --password-stdin")
		}
		if *passwordStdin && *user == "" {
			return errors.New("--password-stdin needs --user")
		}
		cfg, path, err := c.loadConfig()
		if err != nil {
			return err
		}
		in := c.prompter()

		server, err := c.loginServer(cfg, f, in)
		if err != nil {
			return err
		}
		base, err := parseJobServer(server)
		if err != nil {
			return err
		}
		cl, err := c.newClient(base, "")
		if err != nil {
			return err
		}
		sv, err := cl.Version(ctx)
		if err != nil {
			return fmt.Errorf("%s does not answer as a gpuportal server: %w", base, err)
		}
		if base.Scheme == "http" && !isLoopbackHost(base.Hostname()) {
			fmt.Fprintf(c.stderr, "gpuportal: warning: your credentials go to %s unencrypted; use an https:// server URL\n", base.Host)
		}

		token, err := loginToken(ctx, cl, base, in, *user, *passwordStdin, *tokenStdin)
		if err != nil {
			return err
		}
		me, err := cl.WithToken(token).Me(ctx)
		if err != nil {
			return fmt.Errorf("check the token: %w", err)
		}

		name := loginContext(cfg, f.context, base.String())
		cx := cfg.context(name)
		cx.Server, cx.User, cx.Token = base.String(), me.Name, token
		cfg.CurrentContext = name
		if err := saveConfig(path, cfg); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "Logged in to %s (gpuportal %s) as %s.\nSaved as context %q, now the current one, in %s.\n",
			base, sv.Version, loggedInAs(me), name, path)
		if c.getenv(jobTokenEnv) != "" {
			fmt.Fprintf(c.stderr, "gpuportal: note: $%s is set, and commands without --context use it rather than this login\n", jobTokenEnv)
		}
		return nil
	})
}

// loginServer is the server login talks to: --server or the argument,
// else the context's, else $GPUPORTAL_SERVER, else the current
// context's; asked when there is none.
func (c jobCmd) loginServer(cfg *cliConfig, f *jobFlags, in *prompter) (string, error) {
	server := f.server
	if server == "" && f.context != "" {
		if cx := cfg.context(f.context); cx != nil {
			server = cx.Server
		}
	}
	if server == "" {
		server = c.getenv(jobServerEnv)
	}
	if server == "" {
		if cx := cfg.current(); cx != nil {
			server = cx.Server
		}
	}
	if server == "" {
		var err error
		if server, err = in.ask("Server URL (such as https://gpus.example.com): "); err != nil {
			return "", fmt.Errorf("no server given: use --server URL (%w)", err)
		}
	}
	return server, nil
}

// loginToken is the API token login saves: read from standard input
// (--token-stdin), pasted, or made from user's password.
func loginToken(ctx context.Context, cl *client.Client, base *url.URL, in *prompter, user string, passwordStdin, tokenStdin bool) (token string, err error) {
	switch {
	case tokenStdin:
		if token, err = in.line(); err != nil {
			return "", fmt.Errorf("--token-stdin: read the token: %w", err)
		}
	default:
		name := user
		if name == "" {
			if name, err = in.ask("User name (leave empty to paste an API token instead): "); err != nil && !errors.Is(err, errEmpty) {
				return "", fmt.Errorf("no user name given: use --user NAME or --token-stdin (%w)", err)
			}
		}
		if name == "" {
			if token, err = in.secret("API token (from " + base.String() + "/tokens): "); err != nil {
				return "", fmt.Errorf("no API token given: %w", err)
			}
			break
		}
		var password string
		if passwordStdin {
			password, err = in.line()
		} else {
			password, err = in.secret("Password for " + name + ": ")
		}
		if err != nil {
			return "", fmt.Errorf("no password given: %w", err)
		}
		t, err := cl.CreateToken(ctx, name, password)
		if client.StatusOf(err) == http.StatusUnauthorized {
			// Not the API-token hint a command's 401 gets: this is
			// how to get one, and it failed.
			return "", withHint(err, fmt.Sprintf("Check the user name and password. An account that signs in "+
				"through single sign-on has no password here: make a token on %s/tokens and run "+
				"gpuportal login %s --token-stdin", base, base))
		}
		if err != nil {
			return "", err
		}
		token = t.Token
	}
	return token, nil
}

// loginContext is the context a login to server is saved as, made when
// there is none: the one named (--context), else the one of the same
// server, else one named for its host.
func loginContext(cfg *cliConfig, named, server string) string {
	name := named
	if name == "" {
		for _, cx := range cfg.Contexts {
			if sameServer(cx.Server, server) {
				name = cx.Name
				break
			}
		}
	}
	if name == "" {
		name = contextFor(server, cfg)
	}
	if cfg.context(name) == nil {
		cfg.Contexts = append(cfg.Contexts, cliContext{Name: name})
	}
	return name
}

// logoutCommand is "gpuportal logout": the context's token revokes itself on
// its server and is deleted from the config file; the context keeps its
// server for the next login.
func (c jobCmd) logoutCommand() *cobra.Command {
	f := c.command("logout [flags]", "forget the token of a context")
	c.contextFlag(f, "log out of this context (default: the current one)")
	return f.run(func(ctx context.Context, pos []string) (err error) {
		defer wrapCmdErr("logout", &err)
		if len(pos) > 0 {
			return fmt.Errorf("unexpected argument %q", pos[0])
		}
		cfg, path, err := c.loadConfig()
		if err != nil {
			return err
		}
		name := f.context
		if name == "" {
			if cfg.current() == nil {
				return errors.New("no current context to log out of (gpuportal config get-contexts lists the saved ones)")
			}
			name = cfg.CurrentContext
		}
		cx := cfg.context(name)
		if cx == nil {
			return fmt.Errorf("--context: %w", unknownContext(name, cfg))
		}
		if cx.Token == "" {
			fmt.Fprintf(c.stdout, "Context %q is already logged out.\n", name)
			return nil
		}
		revoked := "revoked on " + cx.Server
		if base, err := parseJobServer(cx.Server); err != nil {
			revoked = "not revoked: " + err.Error()
		} else {
			cl, err := c.newClient(base, "")
			if err != nil {
				return err
			}
			switch err := cl.WithToken(cx.Token).RevokeToken(ctx); {
			case client.StatusOf(err) == http.StatusUnauthorized:
				revoked = "it was no longer valid on " + cx.Server
			case err != nil:
				fmt.Fprintf(c.stderr, "gpuportal: warning: the token could not be revoked on %s (%v): it stays valid until it expires; revoke it on %s/tokens\n",
					cx.Server, err, cx.Server)
				revoked = "not revoked on the server"
			}
		}
		cx.Token = ""
		if err := saveConfig(path, cfg); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "Logged out of %q: its token is %s and deleted from %s.\n", name, revoked, path)
		return nil
	})
}

// versions is what gpuportal version -o json prints: the client's build
// and the server's, as GET /api/v1/version returns it.
type versions struct {
	Client    api.Version  `json:"client"`
	Server    *api.Version `json:"server,omitempty"`
	ServerURL string       `json:"server_url,omitempty"`
}

// versionCommand is "gpuportal version": this client's build and the server's.
func (c jobCmd) versionCommand() *cobra.Command {
	f := c.command("version [flags]", "print the versions of this client and of the server")
	f.fs.StringVar(&f.server, "server", "", "the portal's URL (default: $"+jobServerEnv+", else the current context's, else "+jobDefaultServer+")")
	c.contextFlag(f, "ask the server of this saved context")
	f.outputFlag("output format: json or yaml; default: text", "json", "yaml")
	clientOnly := f.fs.Bool("client", false, "print only this client's version, asking no server")
	return f.run(func(ctx context.Context, pos []string) (err error) {
		defer wrapCmdErr("version", &err)
		if len(pos) > 0 {
			return fmt.Errorf("unexpected argument %q", pos[0])
		}
		format, _ := f.format()
		if format != "" && format != "json" && format != "yaml" {
			return fmt.Errorf("-o %q: want json or yaml", format)
		}
		out := versions{Client: api.VersionOf(buildinfo.Read())}
		var serverErr error
		if !*clientOnly {
			var base *url.URL
			if base, _, serverErr = c.server(f); serverErr == nil {
				var cl *client.Client
				var sv api.Version
				if cl, serverErr = c.newClient(base, ""); serverErr == nil {
					sv, serverErr = cl.Version(ctx)
				}
				if serverErr == nil {
					out.Server, out.ServerURL = &sv, base.String()
				} else {
					serverErr = fmt.Errorf("server %s: %w", base, serverErr)
				}
			}
		}
		if format != "" {
			raw, err := json.Marshal(out)
			if err != nil {
				return fmt.Errorf("encode: %w", err)
			}
			if format == "json" {
				err = printJSON(c.stdout, raw)
			} else {
				err = writeYAML(c.stdout, raw)
			}
			return errors.Join(err, serverErr)
		}
		fmt.Fprintf(c.stdout, "Client: %s\n", buildinfo.Read())
		if out.Server != nil {
			fmt.Fprintf(c.stdout, "Server: %s at %s\n", versionLine(*out.Server), out.ServerURL)
		}
		return serverErr
	})
}

// versionLine writes a build as buildinfo.Info.String does.
func versionLine(v api.Version) string {
	in := buildinfo.Info{Version: v.Version, Revision: v.Revision, Modified: v.Modified, GoVersion: v.GoVersion}
	if v.CommitTime != nil {
		in.Time = *v.CommitTime
	}
	return in.String()
}

// errEmpty is an empty answer to a question.
var errEmpty = errors.New("empty answer")

// prompter asks the user questions on stderr and reads the answers from
// stdin: secrets without echo when stdin is a terminal.
type prompter struct {
	r   *bufio.Reader
	fd  int
	tty bool
	out io.Writer
}

func (c jobCmd) prompter() *prompter {
	p := &prompter{r: bufio.NewReader(c.stdin), out: c.stderr}
	if f, ok := c.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.fd, p.tty = int(f.Fd()), true
	}
	return p
}

// line reads one line, trimmed; io.EOF when there is none.
func (p *prompter) line() (string, error) {
	s, err := p.r.ReadString('\n')
	s = strings.TrimSpace(s)
	if s != "" || err == nil {
		return s, nil
	}
	if errors.Is(err, io.EOF) {
		return "", errors.New("nothing to read on standard input")
	}
	return "", err
}

// ask asks a question and returns the answer; errEmpty for none.
func (p *prompter) ask(question string) (string, error) {
	if p.tty {
		fmt.Fprint(p.out, question)
	}
	s, err := p.line()
	if err != nil {
		return "", err
	}
	if s == "" {
		return "", errEmpty
	}
	return s, nil
}

// secret asks for a password or token, not echoed on a terminal.
func (p *prompter) secret(question string) (string, error) {
	if !p.tty {
		s, err := p.line()
		if err == nil && s == "" {
			err = errEmpty
		}
		return s, err
	}
	b, err := withoutEcho(p.fd, func() ([]byte, error) {
		fmt.Fprint(p.out, question)
		return term.ReadPassword(p.fd)
	})
	fmt.Fprintln(p.out)
	if err != nil {
		return "", fmt.Errorf("read from the terminal: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", errEmpty
	}
	return s, nil
}

// wrapCmdErr prefixes an error of a command with its name.
func wrapCmdErr(cmd string, err *error) {
	if *err != nil {
		*err = fmt.Errorf("%s: %w", cmd, explain(*err))
	}
}

// loggedInAs says who me is: "alice (researcher, team vision)", or
// "admin (admin, no team)" for an account of no team.
func loggedInAs(me api.Me) string {
	team := "no team"
	if me.Team != "" {
		team = "team " + me.Team
	}
	return fmt.Sprintf("%s (%s, %s)", me.Name, me.Role, team)
}
