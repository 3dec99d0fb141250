package agent

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLinkSrun(t *testing.T) {
	work := t.TempDir()
	for _, exe := range []string{"/usr/local/bin/gpuportal", "/usr/local/bin/gpuportal", "/opt/gpuportal-2/gpuportal"} {
		dir, err := linkSrun(work, exe)
		if err != nil {
			t.Fatal(err)
		}
		if target, err := os.Readlink(filepath.Join(dir, SrunCommand)); err != nil || target != exe {
			t.Errorf("srun links to %q (%v), want %q", target, err, exe)
		}
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v %v, want a folder of mode 0755", dir, fi.Mode(), err)
		}
	}
	if entries, _ := os.ReadDir(SrunDir(work)); len(entries) != 1 {
		t.Errorf("the folder holds %d entries, want srun alone", len(entries))
	}
}

func TestPathFirst(t *testing.T) {
	for _, tc := range []struct {
		env, want []string
	}{
		{[]string{"HOME=/h", "PATH=/bin"}, []string{"HOME=/h", "PATH=/w/bin:/bin"}},
		// A job's own PATH comes after the agent's: that one is seen.
		{[]string{"PATH=/bin", "X=1", "PATH=/mine"}, []string{"PATH=/bin", "X=1", "PATH=/w/bin:/mine"}},
		{[]string{"PATH="}, []string{"PATH=/w/bin"}},
		{[]string{"HOME=/h"}, []string{"HOME=/h", "PATH=/w/bin:" + DefaultPath}},
	} {
		if got := pathFirst(append([]string(nil), tc.env...), "/w/bin"); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("pathFirst(%q) = %q, want %q", tc.env, got, tc.want)
		}
	}
	if got := pathFirst([]string{"PATH=/bin"}, ""); !reflect.DeepEqual(got, []string{"PATH=/bin"}) {
		t.Errorf("without a folder: %q", got)
	}
}

// writeELF writes a minimal 64-bit ELF executable to path with one
// program header of each type given (PT_INTERP makes it dynamic).
func writeELF(t *testing.T, path string, mode os.FileMode, progs ...elf.ProgType) {
	t.Helper()
	var b bytes.Buffer
	h := elf.Header64{Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Phoff: 64, Ehsize: 64, Phentsize: 56, Phnum: uint16(len(progs))}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	if err := binary.Write(&b, binary.LittleEndian, h); err != nil {
		t.Fatal(err)
	}
	for _, p := range progs {
		if err := binary.Write(&b, binary.LittleEndian, elf.Prog64{Type: uint32(p)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, b.Bytes(), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func TestFindContainerSrun(t *testing.T) {
	dir := t.TempDir()
	static, dynamic := filepath.Join(dir, "static"), filepath.Join(dir, "dynamic")
	writeELF(t, static, 0o755, elf.PT_LOAD)
	writeELF(t, dynamic, 0o755, elf.PT_INTERP, elf.PT_LOAD)
	private := filepath.Join(dir, "private")
	writeELF(t, private, 0o700, elf.PT_LOAD)
	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// An agent's install: its binary in a folder, gpuportal-srun beside
	// it or not, reached through a link as /usr/bin/gpuportal often is.
	install := func(exeProgs []elf.ProgType, beside bool) (exe, srun string) {
		d := t.TempDir()
		real := filepath.Join(d, "gpuportal")
		writeELF(t, real, 0o755, exeProgs...)
		if beside {
			writeELF(t, filepath.Join(d, SrunBinary), 0o755, elf.PT_LOAD)
		}
		link := filepath.Join(t.TempDir(), "gpuportal")
		if err := os.Symlink(real, link); err != nil {
			t.Fatal(err)
		}
		return link, filepath.Join(d, SrunBinary)
	}
	dynExe, besideSrun := install([]elf.ProgType{elf.PT_INTERP, elf.PT_LOAD}, true)
	staticExe, _ := install([]elf.ProgType{elf.PT_LOAD}, false)
	lonelyExe, _ := install([]elf.ProgType{elf.PT_INTERP, elf.PT_LOAD}, false)
	staticReal, _ := filepath.EvalSymlinks(staticExe)

	t.Chdir(dir)
	for _, tc := range []struct {
		name, file, exe string
		want, why, err  string
	}{
		{"a static file given", static, dynExe, static, "", ""},
		{"a static file given by a relative name", "static", dynExe, static, "", ""},
		{"a dynamic file given", dynamic, dynExe, "", "", "linked dynamically: build it with CGO_ENABLED=0"},
		{"a file not all may run", private, dynExe, "", "", "not an executable file that every account may run"},
		{"a script", script, dynExe, "", "", "not an executable"},
		{"a file not there", filepath.Join(dir, "none"), dynExe, "", "", "no such file"},
		{"gpuportal-srun beside the agent", "", dynExe, besideSrun, "", ""},
		{"the agent itself when static", "", staticExe, staticReal, "", ""},
		{"none", "", lonelyExe, "", "the agent's binary is linked dynamically", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why, err := FindContainerSrun(tc.file, tc.exe)
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want one saying %q", err, tc.err)
			case tc.err == "" && err != nil:
				t.Errorf("error %v", err)
			case got != tc.want:
				t.Errorf("found %q, want %q", got, tc.want)
			case !strings.Contains(why, tc.why) || (tc.why == "") != (why == ""):
				t.Errorf("why %q, want %q", why, tc.why)
			}
		})
	}
}
