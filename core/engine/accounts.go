package engine

import (
	"slices"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
)

// Jobs run as their owners' Unix accounts (agent --run-as owner). A
// machine where the owner has no account, or one that may not run jobs,
// refuses the start with a *job.AccountError; the job waits again without
// a failure counted, and its owner's jobs avoid that machine
// (sched.Job.AvoidNodes) until it reconnects or AccountRecheck has
// passed, when the account may have been created. While a job waits, its
// reason names the machines it avoids and why.

// AccountRecheck is how long the jobs of an account avoid a machine that
// refused it before they may try it again.
const AccountRecheck = 10 * time.Minute

// refusals are the machines that refused each account.
type refusals map[string]map[string]refused

// refused is a machine's refusal of an account.
type refused struct {
	at     time.Time
	reason string // the AccountError's words
}

// refuseAccount records that ae.Node refused ae.Account at now.
func (e *Engine) refuseAccount(ae *job.AccountError, now time.Time) {
	if ae.Account == "" || ae.Node == "" {
		return
	}
	if e.noAccount == nil {
		e.noAccount = make(refusals)
	}
	if e.noAccount[ae.Account] == nil {
		e.noAccount[ae.Account] = make(map[string]refused)
	}
	e.noAccount[ae.Account][ae.Node] = refused{at: now, reason: ae.Error()}
	e.cfg.Logger.Warn("a machine refused a job's Unix account: the account's jobs avoid it", "account", ae.Account, "node", ae.Node,
		"reason", ae.Error(), "for", AccountRecheck)
}

// forgetAccounts drops a machine's refusals: it (re)connected, perhaps
// with the accounts created meanwhile.
func (e *Engine) forgetAccounts(node string) {
	for account, nodes := range e.noAccount {
		delete(nodes, node)
		if len(nodes) == 0 {
			delete(e.noAccount, account)
		}
	}
}

// expireAccounts drops the refusals older than AccountRecheck.
func (e *Engine) expireAccounts(now time.Time) {
	for account, nodes := range e.noAccount {
		for node, r := range nodes {
			if now.Sub(r.at) >= AccountRecheck {
				delete(nodes, node)
			}
		}
		if len(nodes) == 0 {
			delete(e.noAccount, account)
		}
	}
}

// avoided lists the machines that refused account, in name order, with
// why.
func (e *Engine) avoided(account string) (nodes, reasons []string) {
	refusals := e.noAccount[account]
	if len(refusals) == 0 {
		return nil, nil
	}
	for n := range refusals {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		reasons = append(reasons, refusals[n].reason)
	}
	return nodes, reasons
}

// explainAccounts puts first in the wait reasons of jobs that avoid
// machines why they do: "alice has no Unix account on gpu-07; ...".
func (e *Engine) explainAccounts(waits []sched.Wait, byID *passJobs) {
	if len(e.noAccount) == 0 {
		return
	}
	for i := range waits {
		j, ok := byID.get(waits[i].JobID)
		if !ok {
			continue
		}
		if _, reasons := e.avoided(j.Account); len(reasons) > 0 {
			waits[i].Reason = strings.Join(reasons, "; ") + "; " + waits[i].Reason
		}
	}
}
