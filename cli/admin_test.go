package cli

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAdminCommands(t *testing.T) {
	data := t.TempDir()
	run := func(stdin string, args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := jobCmd{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut}.execute(context.Background(), append([]string{"admin", "--data", data}, args...))
		return out.String() + errOut.String(), err
	}
	steps := []struct {
		name    string
		stdin   string
		args    []string
		wantOut string
		wantErr string
	}{
		{"create a team", "", []string{"create-team", "--name", "vision", "--guarantee", "8"}, "team vision created", ""},
		{"user with a password from stdin", "correct horse\n", []string{"create-user", "--name", "carol", "--role", "lead", "--team", "vision", "--password-stdin"}, "user carol created", ""},
		{"user with a generated password", "", []string{"create-user", "--name", "root", "--role", "admin"}, "shown once", ""},
		{"duplicate user", "", []string{"create-user", "--name", "root", "--role", "admin"}, "", "already exists"},
		{"unknown role names the flag", "", []string{"create-user", "--name", "x", "--role", "boss"}, "", "--role"},
		{"missing team names the flag", "", []string{"create-user", "--name", "x", "--role", "researcher"}, "", "--team"},
		{"unknown team", "", []string{"create-user", "--name", "x", "--role", "researcher", "--team", "ghosts"}, "", "no such team"},
		{"short password", "short\n", []string{"reset-password", "--name", "carol", "--password-stdin"}, "", "at least 8"},
		{"reset password", "", []string{"reset-password", "--name", "carol"}, "shown once", ""},
		{"set role", "", []string{"set-role", "--name", "carol", "--role", "researcher", "--team", "vision"}, "now researcher", ""},
		{"token", "", []string{"create-token", "--name", "carol", "--ttl", "1h"}, "API token of carol", ""},
		{"token for nobody", "", []string{"create-token", "--name", "nobody"}, "", "not found"},
		{"list users", "", []string{"list-users"}, "carol  researcher  vision  carol  local   enabled", ""},
		{"set unix name", "", []string{"set-unix-name", "--name", "carol", "--unix-name", "cjones"}, "run as the Unix account cjones", ""},
		{"listed unix name", "", []string{"list-users"}, "carol  researcher  vision  cjones", ""},
		{"bad unix name names the flag", "", []string{"set-unix-name", "--name", "carol", "--unix-name", "Carol"}, "", "--unix-name"},
		{"unix name of nobody", "", []string{"set-unix-name", "--name", "nobody", "--unix-name", "x"}, "", "not found"},
		{"unix name is required", "", []string{"set-unix-name", "--name", "carol"}, "", "--unix-name"},
		{"list tokens", "", []string{"list-tokens", "--name", "carol"}, "cli", ""},
		{"revoke a token of nobody", "", []string{"revoke-token", "--name", "nobody", "--id", "1"}, "", "not found"},
		{"revoke a token that is not theirs", "", []string{"revoke-token", "--name", "root", "--id", "1"}, "", "not found"},
		{"revoke a token", "", []string{"revoke-token", "--name", "carol", "--id", "1"}, "token 1 of carol revoked", ""},
		{"bad user name", "", []string{"create-user", "--name", "a b", "--role", "admin"}, "", "name"},
		{"password beyond bcrypt", strings.Repeat("p", 73) + "\n", []string{"reset-password", "--name", "carol", "--password-stdin"}, "", "at most 72"},
		{"disable", "", []string{"disable-user", "--name", "carol"}, "carol is disabled", ""},
		{"listed disabled", "", []string{"list-users"}, "disabled by admin-cli", ""},
		{"enable", "", []string{"enable-user", "--name", "carol"}, "carol is enabled", ""},
		{"delete", "", []string{"delete-user", "--name", "carol"}, "carol is deleted", ""},
		{"delete nobody", "", []string{"delete-user", "--name", "carol"}, "", "not found"},
		{"audit shows what was done", "", []string{"audit"}, "user.delete", ""},
		{"unknown command", "", []string{"frobnicate"}, "", "unknown command"},
	}
	for _, s := range steps {
		out, err := run(s.stdin, s.args...)
		if s.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), s.wantErr) {
				t.Errorf("%s: err = %v, want it to mention %q", s.name, err, s.wantErr)
			}
			continue
		}
		if err != nil || !strings.Contains(out, s.wantOut) {
			t.Errorf("%s: out %q, err %v; want %q", s.name, out, err, s.wantOut)
		}
	}
}

// TestAdminReadsNeedADatabase: a command that only reads (audit, the
// lists) in a folder with no database says so rather than making an
// empty one and printing nothing. An audit ran `gpuportal admin audit`
// without --data in the wrong folder: it printed the header alone, an
// empty audit log, and left a new ./data/gpuportal.db behind. Commands
// that change something still make the database: the first admin of a
// new installation is made that way.
func TestAdminReadsNeedADatabase(t *testing.T) {
	for _, args := range [][]string{{"audit"}, {"list-users"}, {"list-tokens", "--name", "alice"}, {"list-join-tokens"}, {"list-machines"}} {
		data := filepath.Join(t.TempDir(), "data")
		var out bytes.Buffer
		err := jobCmd{stdin: strings.NewReader(""), stdout: &out, stderr: &out}.execute(context.Background(), append([]string{"admin", "--data", data}, args...))
		if err == nil || !strings.Contains(err.Error(), "no database at "+filepath.Join(data, "gpuportal.db")) {
			t.Errorf("%v in an empty folder: err %v, out %q; want no database named", args, err, out.String())
		}
		if _, err := os.Stat(data); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%v made %s (%v)", args, data, err)
		}
	}
}
