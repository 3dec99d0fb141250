package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpuportal/gpuportal/core/engine"
)

// The actions on machines, for admins only: drain, resume, cordon,
// uncordon, and putting a GPU back in service.

// NodeAction is what an admin may do to a machine.
type NodeAction string

// The actions on machines, named as the audit log names them.
const (
	DrainNode    NodeAction = "node.drain"    // no new jobs; it empties as its jobs end
	ResumeNode   NodeAction = "node.resume"   // ready again: neither draining nor cordoned
	CordonNode   NodeAction = "node.cordon"   // no new jobs; running ones keep running
	UncordonNode NodeAction = "node.uncordon" // ready again: neither cordoned nor draining
)

// Done says what became of the machine, for answers: "draining".
func (a NodeAction) Done() string {
	switch a {
	case DrainNode:
		return "draining"
	case ResumeNode:
		return "resumed"
	case CordonNode:
		return "cordoned"
	}
	return "uncordoned"
}

// MayActOnNodes reports whether u may act on machines (drain, cordon,
// put a GPU back in service): admins only.
func MayActOnNodes(u *User) bool { return u.Role == RoleAdmin }

// onlyAdmins refuses an actor who is no admin.
func onlyAdmins(a Actor) error { return onlyAdminsMay(a, "do this") }

// What only admins may do, as a refusal names it ("only admins may
// ..."): the actions a team's lead may try on their team's page or
// machines, for the API's and the pages' refusals alike.
const (
	AdminsSetShare       = "set a team's guaranteed GPUs, weight and cap per user; its lead may cap each member (PUT /api/v1/teams/NAME/caps/USER, the team page's \"Cap a member\")"
	AdminsSetBatchPolicy = "set a team's batch priorities: its high-priority jobs go ahead of other teams' waiting jobs"
	AdminsActOnNodes     = "drain, cordon or resume a machine"
	AdminsClearGPU       = "put a GPU back in service"
)

// onlyAdminsMay refuses an actor who is no admin, naming what only
// admins may do.
func onlyAdminsMay(a Actor, what string) error {
	if a.User.Role != RoleAdmin {
		return forbidden("only admins may %s", what)
	}
	return nil
}

// ActOnNode applies action to the machine node, for an admin, and
// records it in the audit log. On a follower replica it records the
// change in the store, for the leader's next pass. Resume and uncordon
// both make the machine ready again.
func (s *App) ActOnNode(ctx context.Context, a Actor, node string, action NodeAction) error {
	if err := onlyAdminsMay(a, AdminsActOnNodes); err != nil {
		return err
	}
	var err error
	switch action {
	case DrainNode:
		err = s.cfg.Engine.SetDraining(node, true)
	case CordonNode:
		err = s.cfg.Engine.SetCordoned(node, true)
	case ResumeNode, UncordonNode:
		if err = s.cfg.Engine.SetDraining(node, false); err == nil {
			err = s.cfg.Engine.SetCordoned(node, false)
		}
	default:
		return fmt.Errorf("unknown node action %q", action)
	}
	if errors.Is(err, engine.ErrUnknownNode) {
		return &Error{Kind: NotFound, Msg: fmt.Sprintf("no node %q is connected", node)}
	}
	if err != nil {
		return stored(err)
	}
	return s.audit(ctx, a, string(action), node, "")
}

// ClearGPU puts GPU index of machine node back in service, for an admin,
// and records it in the audit log with the fault it had. On a follower
// replica it deletes the store's fault, and the leader's next pass puts
// the GPU back in service.
func (s *App) ClearGPU(ctx context.Context, a Actor, node string, index int) error {
	if err := onlyAdminsMay(a, AdminsClearGPU); err != nil {
		return err
	}
	if index < 0 {
		return invalid("index", "index: want a GPU index (0, 1, ...)")
	}
	faults := s.cfg.Engine.GPUFaults()
	if s.cfg.Leader != nil && !s.cfg.Leader() {
		// A follower runs no machines: the store has the GPUs out of
		// service.
		st, err := s.cfg.Engine.StoredNodeStates(ctx)
		if err != nil {
			return stored(err)
		}
		faults = st.Faults
	}
	var reason string
	for _, f := range faults {
		if f.Node == node && f.Index == index {
			reason = f.Reason
		}
	}
	if err := s.cfg.Engine.ClearGPUFault(node, index); errors.Is(err, engine.ErrGPUHealthy) {
		return &Error{Kind: NotFound, Msg: fmt.Sprintf("GPU %s/%d is not out of service", node, index)}
	} else if err != nil {
		return stored(err)
	}
	return s.audit(ctx, a, "gpu.clear", fmt.Sprintf("%s/%d", node, index), reason)
}
