package cmdline

import (
	"reflect"
	"testing"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr bool
	}{
		{"blanks separate words", "python  train.py\t--epochs 3", []string{"python", "train.py", "--epochs", "3"}, false},
		{"double quotes keep blanks", `echo "a b" c`, []string{"echo", "a b", "c"}, false},
		{"single quotes are literal", `echo '$HOME \n'`, []string{"echo", `$HOME \n`}, false},
		{"backslash escapes", `echo a\ b`, []string{"echo", "a b"}, false},
		{"empty quoted word", `x ""`, []string{"x", ""}, false},
		{"no shell operators", `a; rm -rf / | b`, []string{"a;", "rm", "-rf", "/", "|", "b"}, false},
		{"unclosed quote", `echo "a`, nil, true},
		{"lone backslash", `echo \`, nil, true},
		{"empty line", "   ", nil, false},
	}
	for _, tc := range tests {
		got, err := Split(tc.in)
		if (err != nil) != tc.wantErr || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Split(%q) = %q, %v; want %q, error %v", tc.name, tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func FuzzSplitJoin(f *testing.F) {
	for _, s := range []string{"python train.py", `a "b c" 'd'`, `x\ y`, ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		argv, err := Split(line)
		if err != nil {
			return
		}
		again, err := Split(Join(argv))
		if err != nil || !reflect.DeepEqual(again, argv) && len(argv) > 0 {
			t.Fatalf("join then split changed %q into %q (%v)", argv, again, err)
		}
	})
}
