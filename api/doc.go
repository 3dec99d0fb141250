// Package api holds the JSON types of gpuportal's entities (job, run
// history, queue entry, team, GPU series and point, node) as the REST API
// under /api/v1, the live stream (/ws) and the gpuportal CLI exchange
// them: snake_case names, times in RFC 3339, durations in seconds, memory
// in MiB.
//
// The types carry figures, never compute them: each derived figure
// (executed time and attained service including the run in progress,
// GPUs in use with a shared GPU counted by its share, borrowed) is
// computed once in core/usage and converted to these types in one place
// (web/convert.go), so that every page, topic and command shows the same
// number.
package api
