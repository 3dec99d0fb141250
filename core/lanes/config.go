package lanes

import (
	"fmt"
	"math"

	"github.com/gpuportal/gpuportal/core/memest"
)

// Config is the lane manager's configuration. The zero Config is valid:
// pack, the default padding, aging after DefaultAgingS.
type Config struct {
	// Policy orders the iterations within a lane; "" is Pack.
	Policy Policy
	// Padding is added to every job's estimate at admission; the zero
	// value is memest's default (x1.1 on P, x1.05 on the total).
	Padding memest.Padding
	// AgingS is how long (seconds) a job waits in a Pool before it earns
	// a reservation: a GPU that admits nobody else until the job fits.
	// 0 means DefaultAgingS; a negative value turns aging off.
	AgingS float64
}

// DefaultAgingS is the default Config.AgingS: ten minutes.
const DefaultAgingS = 600

// normalized checks c and fills in the defaults.
func (c Config) normalized() (Config, error) {
	p, err := ParsePolicy(string(c.Policy))
	if err != nil {
		return c, err
	}
	c.Policy = p
	if math.IsNaN(c.AgingS) {
		return c, fmt.Errorf("aging %v s: %w", c.AgingS, ErrBadInput)
	}
	if c.AgingS == 0 {
		c.AgingS = DefaultAgingS
	}
	return c, nil
}
