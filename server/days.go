package server

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// days is a duration flag that also takes whole days: "7d", "90d", "36h".
type days struct{ d *time.Duration }

func (v days) String() string {
	if v.d == nil {
		return ""
	}
	if *v.d%(24*time.Hour) == 0 && *v.d > 0 {
		return fmt.Sprintf("%dd", *v.d/(24*time.Hour))
	}
	return v.d.String()
}

func (v days) Set(s string) error {
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		k, err := strconv.Atoi(n)
		if err != nil {
			return fmt.Errorf("%q: want a number of days such as 7d, or a duration such as 36h", s)
		}
		d = time.Duration(k) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return fmt.Errorf("%q: want a number of days such as 7d, or a duration such as 36h", s)
		}
	}
	if d < time.Hour {
		return fmt.Errorf("%q: must be at least 1h", s)
	}
	*v.d = d
	return nil
}
