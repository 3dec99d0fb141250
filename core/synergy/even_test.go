package synergy

import "testing"

// TestAllocateEvenAmongEquals: identical jobs end up with the same CPUs
// and memory, within one quantum, whatever their order.
func TestAllocateEvenAmongEquals(t *testing.T) {
	img, _ := CatalogueProfile(FamilyImageCNN)
	lang, _ := CatalogueProfile(FamilyLanguage)
	var jobs []JobDemand
	for i := range 8 {
		p := img
		if i%2 == 1 {
			p = lang
		}
		jobs = append(jobs, JobDemand{ID: int64(i + 1), GPUs: 1, Profile: p})
	}
	as := Allocate(SynergyNode, jobs)
	lo, hi := as[0], as[0]
	for i := 0; i < len(as); i += 2 {
		a := as[i]
		if a.CPUMilli < lo.CPUMilli || a.MemMiB < lo.MemMiB {
			lo = a
		}
		if a.CPUMilli > hi.CPUMilli || a.MemMiB > hi.MemMiB {
			hi = a
		}
	}
	if hi.CPUMilli-lo.CPUMilli > 500 || hi.MemMiB-lo.MemMiB > 4096 {
		t.Fatalf("identical image jobs got %d..%d milli-CPUs and %d..%d MiB: want an even split", lo.CPUMilli, hi.CPUMilli, lo.MemMiB, hi.MemMiB)
	}
	if lo.CPUMilli <= lo.PropCPUMilli {
		t.Fatalf("image jobs got no more than their share: %+v", lo)
	}
}
