package sbatch

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/core/job"
)

func TestParseDirectives(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		want    Options
		interp  []string
		ignored []string
	}{
		{"long options, both forms", "#!/bin/bash\n#SBATCH --job-name=train\n#SBATCH --gres=gpu:a100:2 --nodes 2\n#SBATCH --time=1-00:00:00\necho hi\n",
			Options{JobName: "train", GPUsPerNode: 2, Nodes: 2, Time: "1-00:00:00"}, []string{"/bin/bash"}, nil},
		{"short options, attached and apart", "#!/bin/sh\n#SBATCH -J sweep -N1 -t 30\n#SBATCH -a 0-3%2 -o out-%A_%a.txt\n#SBATCH -D /data\n",
			Options{JobName: "sweep", Nodes: 1, Time: "30", Array: "0-3%2", Output: "out-%A_%a.txt", Chdir: "/data"}, []string{"/bin/sh"}, nil},
		{"gpus, tasks, dependency, export, mail", "#SBATCH --gpus=v100:4\n#SBATCH --ntasks-per-node=2 --ntasks=4\n#SBATCH --dependency=afterok:41:42,afterany:43\n" +
			"#SBATCH --export=NONE,LR=0.1,HOME\n#SBATCH --mail-type=END,fail --mail-user=ann@lab.org\n",
			Options{GPUs: 4, NTasksPerNode: 2, NTasks: 4,
				Dependencies: []job.Dependency{{Kind: job.AfterOK, JobID: 41}, {Kind: job.AfterOK, JobID: 42}, {Kind: job.AfterAny, JobID: 43}},
				Export:       []string{"LR=0.1", "HOME"}, ExportNone: true, MailTypes: []string{"END", "FAIL"}, MailUser: "ann@lab.org"},
			[]string{"/bin/sh"}, []string{"line 5: --mail-type=END,fail", "line 5: --mail-user=ann@lab.org"}},
		{"ignored options are said", "#!/usr/bin/env bash\n#SBATCH --partition=gpu -c 8 --mem=64G --exclusive\n#SBATCH --comment=x --requeue\n",
			Options{}, []string{"/usr/bin/env", "bash"},
			[]string{"line 2: --partition=gpu: gpuportal has queues", "line 2: --cpus-per-task=8: CPUs and memory", "line 2: --mem=64G",
				"line 2: --exclusive: each job", "line 3: --comment=x: not acted on", "line 3: --requeue: jobs lost"}},
		{"gpu gres of several types add up, as Slurm counts them", "#SBATCH --gres=gpu:a100:2,gpu:v100:1\n",
			Options{GPUsPerNode: 3}, []string{"/bin/sh"}, nil},
		{"a QOS that is a batch priority is the job's; another is ignored", "#!/bin/sh\n#SBATCH --qos=high\n#SBATCH -q gpu-long\n",
			Options{QOS: "high"}, []string{"/bin/sh"}, []string{"line 3: --qos=gpu-long: gpuportal's QOS are its batch priorities"}},
		{"directives after the first command are comments", "#!/bin/sh\n# a comment\n\n#SBATCH -J first\nhostname\n#SBATCH -J late\n",
			Options{JobName: "first"}, []string{"/bin/sh"}, nil},
		{"a comment after a directive, #SBATCHX and ##SBATCH", "#SBATCH --job-name=a # the name\n#SBATCHX --job-name=b\n##SBATCH --job-name=c\n",
			Options{JobName: "a"}, []string{"/bin/sh"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(tc.script)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(s.Options, tc.want) {
				t.Errorf("options:\n got %+v\nwant %+v", s.Options, tc.want)
			}
			if !reflect.DeepEqual(s.Interpreter, tc.interp) {
				t.Errorf("interpreter %q, want %q", s.Interpreter, tc.interp)
			}
			if len(s.Ignored) != len(tc.ignored) {
				t.Fatalf("ignored %q, want %d like %q", s.Ignored, len(tc.ignored), tc.ignored)
			}
			for i, ig := range s.Ignored {
				if !strings.HasPrefix(ig.String(), tc.ignored[i]) {
					t.Errorf("ignored[%d] = %q, want it to start %q", i, ig, tc.ignored[i])
				}
			}
		})
	}
}

func TestParseBadValues(t *testing.T) {
	for _, tc := range []struct {
		script, want string
	}{
		{"#SBATCH --time=abc\n", "line 1: #SBATCH --time=abc: "},
		{"#!/bin/sh\n#SBATCH -J ok\n#SBATCH --gres=gpu:0\n", "line 3: #SBATCH --gres=gpu:0: "},
		{"#SBATCH --gres=mps:100\n", "line 1: #SBATCH --gres=mps:100: \"mps:100\": gpuportal knows only gpu:N"},
		{"#SBATCH --gres=gpu:two\n", "line 1: #SBATCH --gres=gpu:two: \"gpu:two\": want gpu:N or gpu:TYPE:N"},
		{"#SBATCH --nodes=-1\n", "line 1: #SBATCH --nodes=-1: "},
		{"#SBATCH -N zero\n", "line 1: #SBATCH --nodes=zero: "},
		{"#SBATCH --array=5-1\n", "line 1: #SBATCH --array=5-1: "},
		{"#SBATCH --array=0-3%0\n", "line 1: #SBATCH --array=0-3%0: "},
		{"#SBATCH --dependency=after:12\n", "line 1: #SBATCH --dependency=after:12: "},
		{"#SBATCH --dependency=afterok:1?afterany:2\n", "line 1: #SBATCH --dependency=afterok:1?afterany:2: gpuportal reads afterok"},
		{"#SBATCH --export=GPUPORTAL_JOB_ID=3\n", "line 1: #SBATCH --export=GPUPORTAL_JOB_ID=3: GPUPORTAL_JOB_ID is set by gpuportal"},
		{"#SBATCH --export=1X\n", "line 1: #SBATCH --export=1X: "},
		{"#SBATCH --mail-type=SOMETIMES\n", "line 1: #SBATCH --mail-type=SOMETIMES: "},
		{"#SBATCH --ntasks-per-node\n", "line 1: #SBATCH --ntasks-per-node: needs a value"},
		{"#SBATCH -J 'open\n", "line 1: #SBATCH -J 'open: "},
		{"#SBATCH job-name=x\n", "line 1: #SBATCH job-name=x: not an option"},
		{"#!\n", "line 1: #!: names no interpreter"},
		// An option sbatch does not have is refused, as sbatch refuses it,
		// not run without it; and so are those whose loss would change
		// what the job does or when it runs.
		{"#SBATCH --frobnicate=3\n", "line 1: #SBATCH --frobnicate=3: not an sbatch option"},
		{"#SBATCH --gpus-per-nod=4\n", "line 1: #SBATCH --gpus-per-nod=4: not an sbatch option"},
		{"#SBATCH --hold\n", "line 1: #SBATCH --hold: gpuportal cannot hold a job"},
		{"#SBATCH -H\n", "line 1: #SBATCH --hold: gpuportal cannot hold a job"},
		{"#SBATCH --begin=now+1hour\n", "line 1: #SBATCH --begin=now+1hour: gpuportal cannot start a job later"},
		{"#SBATCH --test-only\n", "line 1: #SBATCH --test-only: "},
		{"#SBATCH --gpus-per-task=2 --ntasks=4\n", "line 1: #SBATCH --gpus-per-task=2: give the job's GPUs"},
	} {
		_, err := Parse(tc.script)
		var e *Error
		if !errors.As(err, &e) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v; want an error starting %q", tc.script, err, tc.want)
		}
	}
}

func TestParseArgs(t *testing.T) {
	o, ignored, script, args, err := ParseArgs([]string{"--time=10", "-J", "cli", "--gres", "gpu:1", "--exclusive", "-p", "gpu", "run.sh", "--lr", "0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Time != "10" || o.JobName != "cli" || o.GPUsPerNode != 1 || script != "run.sh" || !reflect.DeepEqual(args, []string{"--lr", "0.1"}) {
		t.Errorf("ParseArgs: %+v %q %q", o, script, args)
	}
	if len(ignored) != 2 || ignored[0].Line != 0 || !strings.HasPrefix(ignored[0].String(), "command line: --exclusive") {
		t.Errorf("ignored %q", ignored)
	}
	if _, _, _, _, err := ParseArgs([]string{"--wrap", "hostname"}); err == nil || !strings.HasPrefix(err.Error(), "--wrap=hostname: give the command after --") {
		t.Errorf("--wrap: %v", err)
	}
	if _, _, _, _, err := ParseArgs([]string{"--tiem=10", "a.sh"}); err == nil || !strings.HasPrefix(err.Error(), "--tiem=10: not an sbatch option") {
		t.Errorf("--tiem=10: %v", err)
	}
	if _, _, _, _, err := ParseArgs([]string{"--time=10"}); err == nil {
		t.Error("no script: no error")
	}
	if _, _, _, _, err := ParseArgs([]string{"--time=never", "a.sh"}); err == nil || !strings.HasPrefix(err.Error(), "--time=never: ") {
		t.Errorf("bad value on the command line: %v", err)
	}
	merged := Options{JobName: "script", Time: "5", Nodes: 2}.Merge(o)
	if merged.JobName != "cli" || merged.Time != "10" || merged.Nodes != 2 || merged.GPUsPerNode != 1 {
		t.Errorf("Merge: %+v", merged)
	}
}

func TestOutputRedirect(t *testing.T) {
	for _, tc := range []struct{ out, errp, want string }{
		{"", "", ""},
		{"slurm-%j.out", "", `exec >>"slurm-${SLURM_JOB_ID}.out" 2>&1` + "\n"},
		{"logs/%x_%A_%a.log", "err-%j.txt", `exec >>"logs/${SLURM_JOB_NAME}_${SLURM_ARRAY_JOB_ID:-$SLURM_JOB_ID}_${SLURM_ARRAY_TASK_ID:-4294967294}.log" 2>>"err-${SLURM_JOB_ID}.txt"` + "\n"},
		{"", "e.txt", `exec 2>>"e.txt"` + "\n"},
		{"100%%_$HOME`x`.out", "", `exec >>"100%_\$HOME\` + "`x\\`" + `.out" 2>&1` + "\n"},
	} {
		if got := OutputRedirect(tc.out, tc.errp); got != tc.want {
			t.Errorf("OutputRedirect(%q, %q) = %q, want %q", tc.out, tc.errp, got, tc.want)
		}
	}
	if !Shell([]string{"/usr/bin/env", "bash"}) || !Shell([]string{"/bin/sh"}) || Shell([]string{"/usr/bin/python3"}) {
		t.Error("Shell")
	}
}

// TestParseRefusesDOSLineBreaks: a script saved with \r\n is refused, as
// sbatch refuses it; it ran, each line's last word with a \r.
func TestParseRefusesDOSLineBreaks(t *testing.T) {
	_, err := Parse("#!/bin/bash\n#SBATCH --time=10\r\npython train.py\r\n")
	if err == nil || !strings.HasPrefix(err.Error(), "line 2: ends with a DOS line break") {
		t.Errorf("err = %v; want line 2 named", err)
	}
}
