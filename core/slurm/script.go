package slurm

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// jobScript is the batch script every run goes through. Its arguments are
// the job's command, run as they are, never through a shell's parsing.
// GPUPORTAL_GPUS names the GPUs gpuportal's core chose. Where Slurm
// allocated exactly those (SLURM_JOB_GPUS), Slurm's CUDA_VISIBLE_DEVICES
// stands, correct even under cgroup device constraints; otherwise the job
// gets gpuportal's GPUs, and a line in its output says so. A run told to
// resume from its checkpoint (GPUPORTAL_RESUME) says so first, as on
// agents, and so does a later run whose checkpoint folder is empty: it
// starts from scratch.
const jobScript = `#!/bin/sh
# Written by gpuportal: runs one run of a gpuportal job, whose command is
# this script's arguments, on the GPUs gpuportal's scheduler chose.
if [ "${SLURM_JOB_GPUS-}" != "${GPUPORTAL_GPUS-}" ]; then
	if [ -n "${SLURM_JOB_GPUS-}" ]; then
		echo "gpuportal: Slurm allocated GPUs $SLURM_JOB_GPUS, the scheduler chose $GPUPORTAL_GPUS: using $GPUPORTAL_GPUS" >&2
	fi
	CUDA_VISIBLE_DEVICES=$GPUPORTAL_GPUS
	export CUDA_VISIBLE_DEVICES
fi
unset GPUPORTAL_GPUS
if [ "${GPUPORTAL_RESUME-}" = 1 ] && [ -n "${GPUPORTAL_RESUME_RUN-}" ]; then
	echo "gpuportal: run $GPUPORTAL_RUN resumes from the checkpoint run $GPUPORTAL_RESUME_RUN wrote at $GPUPORTAL_CHECKPOINT_AT (GPUPORTAL_RESUME=1)"
elif [ "${GPUPORTAL_RESUME-}" = 1 ]; then
	echo "gpuportal: run $GPUPORTAL_RUN resumes from the checkpoint written at $GPUPORTAL_CHECKPOINT_AT (GPUPORTAL_RESUME=1)"
elif [ "${GPUPORTAL_RUN:-1}" -gt 1 ] && [ -z "$(ls -A "${GPUPORTAL_CHECKPOINT_DIR-}" 2>/dev/null)" ]; then
	echo "gpuportal: run $GPUPORTAL_RUN starts from scratch: its checkpoint folder is empty"
fi
exec "$@"
`

// writeScript writes the batch script at path, unless it is there already.
func writeScript(path string) error {
	if b, err := os.ReadFile(path); err == nil && bytes.Equal(b, []byte(jobScript)) {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".gpuportal-job-*.sh")
	if err != nil {
		return fmt.Errorf("batch script: %w", err)
	}
	_, err = tmp.WriteString(jobScript)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o755)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("batch script %s: %w", path, err)
	}
	return nil
}
