package job

// The priorities of a batch job within its team (docs/scheduling.md, "Job
// classes"), by the names the API, the CLI and the store use. A job of
// normal priority is stored with "" (the default); the scheduling core
// reads high and low as its classes sched.ClassHigh and sched.ClassLow.
const (
	PriorityHigh   = "high"
	PriorityNormal = "normal"
	PriorityLow    = "low"
)

// Priorities are the batch priorities, highest first.
var Priorities = []string{PriorityHigh, PriorityNormal, PriorityLow}

// StoredPriority is how a priority is stored: "" for normal, the name
// otherwise; ok is false for a name that is not a priority.
func StoredPriority(name string) (stored string, ok bool) {
	switch name {
	case "", PriorityNormal:
		return "", true
	case PriorityHigh, PriorityLow:
		return name, true
	}
	return "", false
}

// PriorityName is the name of a stored priority: "normal" for "".
func PriorityName(stored string) string {
	if stored == "" {
		return PriorityNormal
	}
	return stored
}
