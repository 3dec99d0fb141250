// Package gate serves Salus sharing to real processes: a job that opts in
// asks the agent before each training iteration and reports after it, and
// the agent lets at most one iteration per lane run at a time, so jobs
// that share a GPU never hold their ephemeral memory at once beyond what
// the safety condition allows (see core/lanes and docs/salus.md).
//
// A Server listens on a Unix domain socket. The agent adds each job that
// opts in (Server.Add) before starting it and gives it two environment
// variables: GPUPORTAL_GATE, the socket's path, and GPUPORTAL_GATE_TOKEN,
// a secret for this run of the job. It removes the job when its run ends
// (Server.Remove), which releases its lanes.
//
// # Protocol (version 1)
//
// Line-delimited JSON over the socket: the job sends one Request per line
// and reads one Reply per line before it sends the next Request. Every
// message carries "v": 1. A line is at most MaxLineBytes long. Unknown
// fields are ignored, so adding optional fields does not change the
// version.
//
// The first request names the job and proves it is that job:
//
//	-> {"v":1,"op":"hello","job":7,"token":"<GPUPORTAL_GATE_TOKEN>"}
//	<- {"v":1,"op":"hello","ok":true,"job":7,"gpus":[0],"policy":"pack"}
//
// The token must be the current run's, and the connecting process must
// belong to the job (the agent checks, through SO_PEERCRED, that it is in
// the job's process group). One connection per job at a time.
//
// Before each iteration the job asks to start it, with the ephemeral
// memory it expects the iteration to need (0: its admitted estimate). The
// reply comes when the iteration may start:
//
//	-> {"v":1,"op":"acquire","expected_e_mib":4096}
//	<- {"v":1,"op":"acquire","ok":true,"lane_mib":4255,"lane_jobs":2,"waited_ms":31}
//
// After it, the job reports that it finished, with the ephemeral peak it
// measured (0: not measured):
//
//	-> {"v":1,"op":"release","peak_e_mib":3900}
//	<- {"v":1,"op":"release","ok":true,"e_mib":4255}
//
// A reply with "ok": false carries "error". With "stop": true the job
// outgrew its lane (an expected E or a measured peak larger than the
// lane): it gets no more iterations, and the agent stops it and reports
// that it should run again with a larger estimate (Config.Stop). Any
// other error ends the connection.
package gate
