package integration

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The fault tests judge from evidence the jobs leave, not from what the
// server says: every job they run appends a line to its own trace file
// every tick, naming the time, the job, its run, its PID, the machine and
// its GPUs. A job that runs twice at once, or a GPU that runs two jobs,
// shows as overlapping intervals in those files.

// tick is how often a traced job writes a line.
const tick = 250 * time.Millisecond

// tracedJob returns the command of a job that writes ticks lines to a
// trace file in dir, one every tick, then exits 0. Each run starts over.
// Where the agent does not say the run and the machine (a build before
// runs were numbered), the shell's PID stands for the run and the agent's
// work folder for the machine.
func tracedJob(dir string, ticks int) []string {
	script := fmt.Sprintf(tickLoop+`i=0; while [ $i -lt %d ]; do `+
		`stamp; echo "$t $GPUPORTAL_JOB_ID ${GPUPORTAL_RUN:-$$} $$ ${GPUPORTAL_NODE:-$(basename $(dirname $(dirname $PWD)))} $CUDA_VISIBLE_DEVICES" >> %s/job-$GPUPORTAL_JOB_ID.trace; `+
		`pause; i=$((i+1)); done`, ticks, dir)
	return []string{"bash", "-c", script}
}

// tickLoop defines the two bash functions a traced job ticks with,
// neither of which starts a process: stamp sets t to the time in
// milliseconds, pause waits a tick (a read that times out on a pipe
// nobody writes). Their bodies end in ";}", not " }": a job's page
// shows its command, and the screen checks take "{ ... }" for template
// source. A loop that forked date and sleep every tick ran at
// a quarter of its pace on a loaded 2-core machine, and the tests'
// bounds, sized by its ticks, failed jobs that were still running.
var tickLoop = fmt.Sprintf(`exec 3<> <(:); stamp() { t=${EPOCHREALTIME/[.,]/}; t=${t:0:${#t}-3};}; `+
	`pause() { read -r -t %.2f -u 3;}; `, tick.Seconds())

// checkpointedJob returns the command of a traced job that counts ticks
// to ticks, saving the count in its checkpoint folder every every ticks
// (atomically: a file written, then renamed), and that resumes from that
// count when the agent says it may (GPUPORTAL_RESUME=1). Each line names
// the tick it starts, so the trace files show what a resumed run redoes.
func checkpointedJob(dir string, ticks, every int) []string {
	script := fmt.Sprintf(tickLoop+`i=0; c="$GPUPORTAL_CHECKPOINT_DIR/tick"; `+
		`if [ "${GPUPORTAL_RESUME:-}" = 1 ] && [ -f "$c" ]; then read -r i < "$c"; fi; `+
		`while [ $i -lt %d ]; do `+
		`stamp; echo "$t $GPUPORTAL_JOB_ID $GPUPORTAL_RUN $$ $GPUPORTAL_NODE $CUDA_VISIBLE_DEVICES $i" >> %s/job-$GPUPORTAL_JOB_ID.trace; `+
		`pause; i=$((i+1)); `+
		`if [ $((i %% %d)) -eq 0 ]; then echo $i > "$c.new" && mv "$c.new" "$c"; fi; done`, ticks, dir, every)
	return []string{"bash", "-c", script}
}

// traceLine is one line of a trace file.
type traceLine struct {
	at       time.Time
	job, run int64
	pid      int
	node     string
	gpus     []string
	tick     int // the tick a checkpointed job starts; -1 for others
}

// runSpan is what the trace files show of one run's part on one machine
// (a job on several machines runs one part on each): when it was seen
// first and last, where, and by which processes.
type runSpan struct {
	job, run    int64
	first, last time.Time
	node        string
	gpus        []string
	pids        map[int]bool
	lines       int
	// firstTick and lastTick are the ticks a checkpointed job's run
	// traced first and last (-1: not a checkpointed job).
	firstTick, lastTick int
}

func (r *runSpan) String() string {
	return fmt.Sprintf("job %d run %d on %s GPUs %s from %s to %s (%d lines)", r.job, r.run, r.node,
		strings.Join(r.gpus, ","), r.first.Format("15:04:05.000"), r.last.Format("15:04:05.000"), r.lines)
}

// readTraces reads every trace file in dir into spans, by job and run.
func readTraces(t *testing.T, dir string) []*runSpan {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "job-*.trace"))
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		job, run int64
		node     string
	}
	spans := make(map[key]*runSpan)
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			l, ok := parseTraceLine(sc.Text())
			if !ok {
				continue // a line cut short by a kill
			}
			k := key{l.job, l.run, l.node}
			s := spans[k]
			if s == nil {
				s = &runSpan{job: l.job, run: l.run, first: l.at, node: l.node, gpus: l.gpus, pids: map[int]bool{},
					firstTick: l.tick, lastTick: l.tick}
				spans[k] = s
			}
			if l.at.Before(s.first) {
				s.firstTick = l.tick
			}
			if !l.at.Before(s.last) {
				s.lastTick = l.tick
			}
			if l.at.Before(s.first) {
				s.first = l.at
			}
			if l.at.After(s.last) {
				s.last = l.at
			}
			s.pids[l.pid] = true
			s.lines++
		}
		f.Close()
	}
	out := make([]*runSpan, 0, len(spans))
	for _, s := range spans {
		out = append(out, s)
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].job != out[b].job {
			return out[a].job < out[b].job
		}
		if out[a].run != out[b].run {
			return out[a].run < out[b].run
		}
		return out[a].node < out[b].node
	})
	return out
}

func parseTraceLine(line string) (traceLine, bool) {
	f := strings.Fields(line)
	if len(f) < 5 {
		return traceLine{}, false
	}
	ms, err1 := strconv.ParseInt(f[0], 10, 64)
	job, err2 := strconv.ParseInt(f[1], 10, 64)
	run, err3 := strconv.ParseInt(f[2], 10, 64)
	pid, err4 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
		return traceLine{}, false
	}
	l := traceLine{at: time.UnixMilli(ms), job: job, run: run, pid: pid, node: f[4], tick: -1}
	if len(f) > 5 {
		l.gpus = strings.Split(f[5], ",")
	}
	if len(f) > 6 {
		if n, err := strconv.Atoi(f[6]); err == nil {
			l.tick = n
		}
	}
	return l, true
}

// overlaps reports whether two spans were both seen running at some
// moment: each saw a line while the other was between its first and last.
func overlaps(a, b *runSpan) bool {
	return a.first.Before(b.last) && b.first.Before(a.last)
}

// traceViolations lists what the spans show that must never happen: a job
// running twice at once, and a GPU running two jobs at once.
func traceViolations(spans []*runSpan) []string {
	var out []string
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if !overlaps(a, b) {
				continue
			}
			if a.job == b.job && a.run == b.run {
				continue // two parts of one run, on two machines
			}
			if a.job == b.job {
				out = append(out, fmt.Sprintf("job %d ran twice at once: %s and %s", a.job, a, b))
				continue
			}
			if a.node != b.node {
				continue
			}
			for _, g := range a.gpus {
				for _, h := range b.gpus {
					if g == h {
						out = append(out, fmt.Sprintf("GPU %s:%s ran two jobs at once: %s and %s", a.node, g, a, b))
					}
				}
			}
		}
	}
	return out
}

// checkTraces fails t for every violation in dir's traces and logs the
// spans, so a failure shows what ran where.
func checkTraces(t *testing.T, dir string) []*runSpan {
	t.Helper()
	spans := readTraces(t, dir)
	bad := traceViolations(spans)
	for _, v := range bad {
		t.Error(v)
	}
	if len(bad) > 0 || testing.Verbose() {
		for _, s := range spans {
			t.Logf("trace: %s", s)
		}
	}
	return spans
}

// TestTraceViolations checks the checker itself on made-up spans.
func TestTraceViolations(t *testing.T) {
	at := func(s float64) time.Time { return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))) }
	span := func(job, run int64, node, gpu string, from, to float64) *runSpan {
		return &runSpan{job: job, run: run, node: node, gpus: []string{gpu}, first: at(from), last: at(to)}
	}
	tests := []struct {
		name  string
		spans []*runSpan
		want  int
	}{
		{"one run", []*runSpan{span(1, 1, "a", "0", 0, 10)}, 0},
		{"runs one after the other", []*runSpan{span(1, 1, "a", "0", 0, 10), span(1, 2, "b", "0", 11, 20)}, 0},
		{"two runs at once", []*runSpan{span(1, 1, "a", "0", 0, 10), span(1, 2, "b", "0", 5, 20)}, 1},
		{"two jobs on one GPU", []*runSpan{span(1, 1, "a", "0", 0, 10), span(2, 1, "a", "0", 9, 20)}, 1},
		{"two jobs on two GPUs", []*runSpan{span(1, 1, "a", "0", 0, 10), span(2, 1, "a", "1", 0, 10)}, 0},
		{"same GPU index on two machines", []*runSpan{span(1, 1, "a", "0", 0, 10), span(2, 1, "b", "0", 0, 10)}, 0},
		{"one run's parts on two machines", []*runSpan{span(1, 1, "a", "0", 0, 10), span(1, 1, "b", "0", 0, 10)}, 0},
		{"a part of an old run beside the new run", []*runSpan{span(1, 1, "a", "0", 0, 10), span(1, 1, "b", "0", 0, 14), span(1, 2, "c", "0", 12, 20)}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := traceViolations(tc.spans); len(got) != tc.want {
				t.Errorf("violations %q, want %d", got, tc.want)
			}
		})
	}
	if _, ok := parseTraceLine("1700000000123 4 2 999 a1 0,1"); !ok {
		t.Error("a whole line does not parse")
	}
	if l, ok := parseTraceLine("1700000000123 4 2 999 a1 0 17"); !ok || l.tick != 17 {
		t.Errorf("a checkpointed job's line: tick %d, %v; want 17", l.tick, ok)
	}
	if _, ok := parseTraceLine("1700000000123 4"); ok {
		t.Error("a cut line parses")
	}
}
