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

type accountKey struct{ account, node string }

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
		e.noAccount = make(map[accountKey]refused)
	}
	e.noAccount[accountKey{ae.Account, ae.Node}] = refused{at: now, reason: ae.Error()}
	e.cfg.Logger.Warn("a machine refused a job's Unix account: the account's jobs avoid it", "account", ae.Account, "node", ae.Node,
		"reason", ae.Error(), "for", AccountRecheck)
}

// forgetAccounts drops a machine's refusals: it (re)connected, perhaps
// with the accounts created meanwhile.
func (e *Engine) forgetAccounts(node string) {
	for k := range e.noAccount {
		if k.node == node {
			delete(e.noAccount, k)
		}
	}
}

// avoided lists the machines that refused account, in name order, with
// why, dropping refusals older than AccountRecheck.
func (e *Engine) avoided(account string, now time.Time) (nodes, reasons []string) {
	if account == "" || len(e.noAccount) == 0 {
		return nil, nil
	}
	for k, r := range e.noAccount {
		if now.Sub(r.at) >= AccountRecheck {
			delete(e.noAccount, k)
			continue
		}
		if k.account == account {
			nodes = append(nodes, k.node)
		}
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		reasons = append(reasons, e.noAccount[accountKey{account, n}].reason)
	}
	return nodes, reasons
}

// explainAccounts puts first in the wait reasons of jobs that avoid
// machines why they do: "alice has no Unix account on gpu-07; ...".
func (e *Engine) explainAccounts(waits []sched.Wait, byID map[int64]Job, now time.Time) {
	if len(e.noAccount) == 0 {
		return
	}
	for i := range waits {
		j, ok := byID[waits[i].JobID]
		if !ok {
			continue
		}
		if _, reasons := e.avoided(j.Account, now); len(reasons) > 0 {
			waits[i].Reason = strings.Join(reasons, "; ") + "; " + waits[i].Reason
		}
	}
}
