package gpu

import (
	"strings"
	"testing"
)

// FuzzParseSimFaults: any text gives faults or an error naming the
// faulty item, never a panic; what parses writes back as it parses.
func FuzzParseSimFaults(f *testing.F) {
	for _, s := range []string{"0:xid79@2s", "1:ecc", "0:xid79@2s,1:ecc", "", ",", "x:ecc", "0:xid", "0:ecc@-1s", "3:xid13@1h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		faults, err := ParseSimFaults(s)
		if err != nil {
			if !strings.Contains(err.Error(), "fault ") {
				t.Fatalf("error %q names no fault", err)
			}
			return
		}
		for _, ft := range faults {
			again, err := ParseSimFaults(ft.String())
			if err != nil || len(again) != 1 || again[0] != ft {
				t.Fatalf("%+v written as %q reads back as %+v, %v", ft, ft.String(), again, err)
			}
		}
	})
}
