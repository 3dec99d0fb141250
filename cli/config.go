package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// configHelp is what "gpuportal config --help" says besides the
// commands.
const configHelp = `List and switch contexts.

A context is a server and your API token for it, saved by "gpuportal
login" in the config file (gpuportal/config.yaml in your config folder:
$XDG_CONFIG_HOME, else ~/.config), which only you may read (chmod 600). Every client command takes
--context NAME to use another context than the current one.`

// cliConfig is the client's config file: the servers a user has logged
// in to, as contexts, and which one commands use by default.
type cliConfig struct {
	CurrentContext string       `yaml:"current-context"`
	Contexts       []cliContext `yaml:"contexts"`
}

// cliContext is one server and the user's token for it.
type cliContext struct {
	Name   string `yaml:"name"`
	Server string `yaml:"server"`
	// User is who the token belongs to, as the server said at login.
	User  string `yaml:"user,omitempty"`
	Token string `yaml:"token,omitempty"`
}

// context returns the context named name, or nil.
func (cfg *cliConfig) context(name string) *cliContext {
	for i := range cfg.Contexts {
		if cfg.Contexts[i].Name == name {
			return &cfg.Contexts[i]
		}
	}
	return nil
}

// current returns the current context, or nil when there is none.
func (cfg *cliConfig) current() *cliContext {
	if cfg.CurrentContext == "" {
		return nil
	}
	return cfg.context(cfg.CurrentContext)
}

// contextNames lists the contexts' names in the file's order.
func (cfg *cliConfig) contextNames() []string {
	names := make([]string, len(cfg.Contexts))
	for i, c := range cfg.Contexts {
		names[i] = c.Name
	}
	return names
}

// configPath is the client's config file: gpuportal/config.yaml in the
// user's config folder ($XDG_CONFIG_HOME or ~/.config on Linux).
func (c jobCmd) configPath() (string, error) {
	dir, err := c.configDir()
	if err != nil {
		return "", fmt.Errorf("find the config folder: %w", err)
	}
	return filepath.Join(dir, "gpuportal", "config.yaml"), nil
}

// loadConfig reads the config file; a missing one is an empty config. A
// file that other users may read is refused: it holds tokens.
func (c jobCmd) loadConfig() (*cliConfig, string, error) {
	path, err := c.configPath()
	if err != nil {
		return nil, "", err
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &cliConfig{}, path, nil
	}
	if err != nil {
		return nil, path, fmt.Errorf("read the config file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, path, fmt.Errorf("config file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, path, fmt.Errorf("config file %s may be read by other users (mode %04o), and it holds your API tokens: run chmod 600 %s (and revoke its tokens on the portal's API tokens page if others may have read them)", path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, path, fmt.Errorf("read the config file: %w", err)
	}
	var cfg cliConfig
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return nil, path, fmt.Errorf("config file %s: %w (fix it, or delete it and run gpuportal login)", path, err)
	}
	seen := map[string]bool{}
	for _, cx := range cfg.Contexts {
		if cx.Name == "" {
			return nil, path, fmt.Errorf("config file %s: a context has no name", path)
		}
		if seen[cx.Name] {
			return nil, path, fmt.Errorf("config file %s: context %q appears twice", path, cx.Name)
		}
		seen[cx.Name] = true
	}
	return &cfg, path, nil
}

// saveConfig writes the config file, readable by its owner only: to a
// new file renamed over the old one, so that a crash leaves one or the
// other.
func saveConfig(path string, cfg *cliConfig) error {
	var buf bytes.Buffer
	buf.WriteString("# gpuportal's contexts: written by gpuportal login and gpuportal config. Holds API tokens: keep it chmod 600.\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(cfg); err != nil {
		return fmt.Errorf("encode the config: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save the config: %w", err)
	}
	f, err := os.CreateTemp(dir, ".config-*.yaml")
	if err != nil {
		return fmt.Errorf("save the config: %w", err)
	}
	defer os.Remove(f.Name()) // fails once renamed
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("save the config: %w", err)
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("save the config: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("save the config: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save the config: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("save the config: %w", err)
	}
	return nil
}

// sameServer reports whether two server URLs name the same server, so
// that a context's token never goes to another one.
func sameServer(a, b string) bool {
	ua, errA := parseJobServer(a)
	ub, errB := parseJobServer(b)
	if errA != nil || errB != nil {
		return false
	}
	return strings.EqualFold(ua.Scheme, ub.Scheme) && strings.EqualFold(ua.Host, ub.Host) && ua.Path == ub.Path
}

// configCommand is "gpuportal config ...".
func (c jobCmd) configCommand() *cobra.Command {
	sub := func(name, use, short string) *cobra.Command {
		f := c.command(use, short)
		var output string
		if name == "get-contexts" {
			f.fs.StringVarP(&output, "output", "o", "", "name: print only the contexts' names")
			f.complete("output", func() []string { return []string{"name"} }, "output format")
		}
		if name == "use-context" || name == "delete-context" {
			f.cmd.ValidArgsFunction = func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return described(c.contextNamesFor(), "context"), cobra.ShellCompDirectiveNoFileComp
			}
		}
		return f.run(func(_ context.Context, pos []string) (err error) {
			defer wrapCmdErr("config "+name, &err)
			return c.config(name, output, pos)
		})
	}
	return group(&cobra.Command{Use: "config", Short: "list and switch contexts", Long: configHelp},
		sub("get-contexts", "get-contexts [-o name]", "the saved contexts; * marks the current one"),
		sub("current-context", "current-context", "the current context's name"),
		sub("use-context", "use-context NAME", "make a context the current one"),
		sub("delete-context", "delete-context NAME", "forget a context and its token"),
	)
}

// config runs config command cmd with -o output and the arguments pos.
func (c jobCmd) config(cmd, output string, pos []string) error {
	if output != "" && output != "name" {
		return fmt.Errorf("-o %q: want name (or no -o for the table)", output)
	}
	cfg, path, err := c.loadConfig()
	if err != nil {
		return err
	}
	wantArgs := 0
	if cmd == "use-context" || cmd == "delete-context" {
		wantArgs = 1
	}
	if len(pos) != wantArgs {
		if wantArgs == 1 {
			return fmt.Errorf("want one context name, got %d arguments (gpuportal config get-contexts lists them)", len(pos))
		}
		return fmt.Errorf("unexpected argument %q", pos[0])
	}
	switch cmd {
	case "get-contexts":
		if output == "name" {
			for _, n := range cfg.contextNames() {
				fmt.Fprintln(c.stdout, n)
			}
			return nil
		}
		if len(cfg.Contexts) == 0 {
			fmt.Fprintln(c.stdout, "no contexts: run gpuportal login")
			return nil
		}
		w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "CURRENT\tNAME\tSERVER\tUSER\tLOGGED IN")
		for _, cx := range cfg.Contexts {
			cur, in := "", "yes"
			if cx.Name == cfg.CurrentContext {
				cur = "*"
			}
			if cx.Token == "" {
				in = "no"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", cur, cx.Name, cx.Server, cx.User, in)
		}
		return w.Flush()
	case "current-context":
		if cfg.current() == nil {
			return errors.New("no current context: run gpuportal login, or gpuportal config use-context NAME")
		}
		fmt.Fprintln(c.stdout, cfg.CurrentContext)
		return nil
	case "use-context":
		if cfg.context(pos[0]) == nil {
			return unknownContext(pos[0], cfg)
		}
		cfg.CurrentContext = pos[0]
		if err := saveConfig(path, cfg); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "Switched to context %q (%s).\n", pos[0], cfg.current().Server)
		return nil
	default: // delete-context
		if cfg.context(pos[0]) == nil {
			return unknownContext(pos[0], cfg)
		}
		kept := cfg.Contexts[:0]
		for _, cx := range cfg.Contexts {
			if cx.Name != pos[0] {
				kept = append(kept, cx)
			}
		}
		cfg.Contexts = kept
		if cfg.CurrentContext == pos[0] {
			cfg.CurrentContext = ""
		}
		if err := saveConfig(path, cfg); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "Deleted context %q.\n", pos[0])
		return nil
	}
}

// unknownContext is the error for a context name that is not saved.
func unknownContext(name string, cfg *cliConfig) error {
	if len(cfg.Contexts) == 0 {
		return fmt.Errorf("no context %q: none is saved; run gpuportal login --context %s", name, name)
	}
	return fmt.Errorf("no context %q: the saved ones are %s", name, strings.Join(cfg.contextNames(), ", "))
}

// contextFor names a new context for a server: its host (with the port
// when it is not the scheme's), unless that name is taken by a context
// of another server.
func contextFor(server string, cfg *cliConfig) string {
	u, err := url.Parse(server)
	name := server
	if err == nil && u.Host != "" {
		name = u.Host
	}
	if cx := cfg.context(name); cx == nil || sameServer(cx.Server, server) {
		return name
	}
	for i := 2; ; i++ {
		n := fmt.Sprintf("%s-%d", name, i)
		if cx := cfg.context(n); cx == nil || sameServer(cx.Server, server) {
			return n
		}
	}
}

// contextNamesFor lists the saved contexts, for completion; none when the
// file cannot be read.
func (c jobCmd) contextNamesFor() []string {
	cfg, _, err := c.loadConfig()
	if err != nil {
		return nil
	}
	return cfg.contextNames()
}
