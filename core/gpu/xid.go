package gpu

import "fmt"

// XID errors are the NVIDIA driver's error reports, each a code. Some
// report a fault in the GPU or its link (the GPU fell off the bus, an
// uncorrectable memory error); others only that an application misbehaved
// (an illegal memory access, a kernel that timed out), which says nothing
// about the GPU.

// applicationXIDs are the codes that report an application's fault, not
// the GPU's: the list NVIDIA's Kubernetes device plugin ignores by default.
var applicationXIDs = map[int]bool{
	13:  true, // graphics engine exception
	31:  true, // GPU memory page fault
	43:  true, // GPU stopped processing
	45:  true, // preemptive cleanup, due to a previous error
	68:  true, // NVDEC0 exception
	109: true, // context switch timeout
}

// xidNames describes the codes admins meet most.
var xidNames = map[int]string{
	13:  "graphics engine exception",
	31:  "GPU memory page fault",
	43:  "GPU stopped processing",
	45:  "preemptive cleanup",
	48:  "double-bit ECC error",
	61:  "internal micro-controller breakpoint",
	62:  "internal micro-controller halt",
	63:  "ECC page retirement or row remapping",
	64:  "ECC page retirement or row remapper failure",
	68:  "NVDEC0 exception",
	74:  "NVLink error",
	79:  "GPU fell off the bus",
	92:  "high single-bit ECC error rate",
	94:  "contained ECC error",
	95:  "uncontained ECC error",
	109: "context switch timeout",
	119: "GSP RPC timeout",
	120: "GSP error",
}

// CriticalXID reports whether an XID code says the GPU itself failed, so
// that jobs should not run on it until an admin has looked.
func CriticalXID(code int) bool { return code > 0 && !applicationXIDs[code] }

// XIDText names an XID code for people: "XID 79 (GPU fell off the bus)".
func XIDText(code int) string {
	if name, ok := xidNames[code]; ok {
		return fmt.Sprintf("XID %d (%s)", code, name)
	}
	return fmt.Sprintf("XID %d", code)
}
