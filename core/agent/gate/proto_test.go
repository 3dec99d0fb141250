package gate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		want    Request
		wantErr string
	}{
		{"hello", `{"v":1,"op":"hello","job":7,"token":"abc"}`, Request{V: 1, Op: OpHello, Job: 7, Token: "abc"}, ""},
		{"acquire with E", `{"v":1,"op":"acquire","expected_e_mib":4096}`, Request{V: 1, Op: OpAcquire, ExpectedEMiB: 4096}, ""},
		{"acquire without E", `{"v":1,"op":"acquire"}`, Request{V: 1, Op: OpAcquire}, ""},
		{"release with a peak", `{"v":1,"op":"release","peak_e_mib":3900}`, Request{V: 1, Op: OpRelease, PeakEMiB: 3900}, ""},
		{"unknown fields are ignored", `{"v":1,"op":"release","later":[1,2],"peak_e_mib":1}`, Request{V: 1, Op: OpRelease, PeakEMiB: 1}, ""},
		{"no version", `{"op":"acquire"}`, Request{}, "version 0"},
		{"a later version", `{"v":2,"op":"acquire"}`, Request{}, "version 2"},
		{"unknown op", `{"v":1,"op":"grab"}`, Request{}, "unknown op"},
		{"hello without a job", `{"v":1,"op":"hello","token":"abc"}`, Request{}, "job 0"},
		{"hello without a token", `{"v":1,"op":"hello","job":7}`, Request{}, "token"},
		{"hello with a huge token", `{"v":1,"op":"hello","job":7,"token":"` + strings.Repeat("x", 300) + `"}`, Request{}, "token"},
		{"negative E", `{"v":1,"op":"acquire","expected_e_mib":-1}`, Request{}, "out of range"},
		{"absurd peak", `{"v":1,"op":"release","peak_e_mib":9007199254740993}`, Request{}, "out of range"},
		{"a job ID as a string", `{"v":1,"op":"hello","job":"7","token":"abc"}`, Request{}, "cannot unmarshal"},
		{"fractional MiB", `{"v":1,"op":"acquire","expected_e_mib":1.5}`, Request{}, "cannot unmarshal"},
		{"two objects", `{"v":1,"op":"acquire"}{"v":1,"op":"acquire"}`, Request{}, "invalid character"},
		{"not JSON", `acquire 4096`, Request{}, "invalid character"},
		{"too long", `{"v":1,"op":"acquire","x":"` + strings.Repeat("x", MaxLineBytes) + `"}`, Request{}, "at most"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRequest([]byte(tc.line))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrProtocol) {
					t.Fatalf("err = %v, want a protocol error naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseRequest = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// FuzzParseRequest checks that the parser never panics, that what it
// accepts is in range, and that an accepted request encodes back to one
// that parses the same.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"op":"hello","job":7,"token":"abc"}`,
		`{"v":1,"op":"acquire","expected_e_mib":4096}`,
		`{"v":1,"op":"release","peak_e_mib":3900}`,
		`{"v":1,"op":"release","peak_e_mib":-3}`,
		`{"v":2}`, `null`, `[]`, `{"v":1e0,"op":"acquire"}`, "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := ParseRequest(line)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v is not a protocol error", err)
			}
			return
		}
		if r.V != Version || r.ExpectedEMiB < 0 || r.PeakEMiB < 0 || r.ExpectedEMiB > maxMiB || r.PeakEMiB > maxMiB {
			t.Fatalf("accepted %+v", r)
		}
		if r.Op == OpHello && (r.Job <= 0 || r.Token == "") {
			t.Fatalf("accepted hello %+v", r)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseRequest(b)
		if err != nil || again != r {
			t.Fatalf("round trip of %+v: %+v, %v", r, again, err)
		}
	})
}
