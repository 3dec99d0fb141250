//go:build cgo

package nvml

import (
	nv "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// maxEventsPerSample bounds the XID events read in one sample, so that a
// storm of them cannot hold a sample up.
const maxEventsPerSample = 64

// xidState counts one GPU's critical XID events.
type xidState struct {
	count uint64
	last  int
}

// openEvents registers every GPU for XID events. Where NVML cannot (some
// GPUs and drivers do not support events, such as GPUs in some virtual
// machines), the GPU reports no XID errors and its ECC counter alone
// shows its memory failing.
func (b *Backend) openEvents() {
	b.xids = make([]xidState, len(b.devs))
	set, ret := b.lib.EventSetCreate()
	if ret != nv.SUCCESS {
		b.log.Info("XID errors are not available: NVML cannot create an event set", "err", ret.Error())
		return
	}
	registered := 0
	for i, d := range b.devs {
		if ret := d.RegisterEvents(nv.EventTypeXidCriticalError, set); ret != nv.SUCCESS {
			b.log.Info("XID errors are not available for a GPU", "gpu", i, "uuid", b.info[i].UUID, "err", ret.Error())
			continue
		}
		registered++
	}
	if registered == 0 {
		_ = set.Free()
		return
	}
	b.events = set
}

// readEvents counts the critical XID events that arrived since the last
// call, without waiting for more.
func (b *Backend) readEvents() {
	if b.events == nil {
		return
	}
	for range maxEventsPerSample {
		ev, ret := b.events.Wait(0)
		if ret == nv.ERROR_TIMEOUT {
			return
		}
		if ret != nv.SUCCESS {
			if !b.warned["events"] {
				b.warned["events"] = true
				b.log.Warn("cannot read XID events", "err", ret.Error())
			}
			return
		}
		if ev.EventType&nv.EventTypeXidCriticalError == 0 {
			continue
		}
		i := b.indexOf(ev.Device)
		code := int(ev.EventData)
		if i < 0 || !gpu.CriticalXID(code) {
			b.log.Info("XID event", "gpu", i, "xid", code, "what", gpu.XIDText(code))
			continue
		}
		b.xids[i].count++
		b.xids[i].last = code
		b.log.Warn("GPU failed", "gpu", i, "uuid", b.info[i].UUID, "xid", code, "what", gpu.XIDText(code))
	}
}

// indexOf finds the GPU an event names: by its handle, else by its UUID.
func (b *Backend) indexOf(d nv.Device) int {
	if d == nil {
		return -1
	}
	for i, known := range b.devs {
		if known == d {
			return i
		}
	}
	uuid, ret := d.GetUUID()
	if ret != nv.SUCCESS {
		return -1
	}
	for i, info := range b.info {
		if info.UUID == uuid {
			return i
		}
	}
	return -1
}

// closeEvents frees the event set.
func (b *Backend) closeEvents() {
	if b.events != nil {
		_ = b.events.Free()
		b.events = nil
	}
}
