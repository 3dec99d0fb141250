package models

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// maxEventDetail is the size of JobEvent.Detail.
const maxEventDetail = 512

// AddJobNote adds a line to a job's history without changing its state
// (engine.JobNoter): the event carries the job's current state and note
// as its detail, cut to fit.
func (s *Store) AddJobNote(ctx context.Context, id int64, note string, at time.Time) error {
	var j Job
	if err := s.db.WithContext(ctx).Select("id", "state").First(&j, id).Error; err != nil {
		return fmt.Errorf("note on job %d: %w", id, err)
	}
	e := JobEvent{JobID: id, At: at, State: j.State, Detail: noteDetail(note)}
	if err := s.db.WithContext(ctx).Create(&e).Error; err != nil {
		return fmt.Errorf("note on job %d: %w", id, err)
	}
	return nil
}

// noteDetail is note cut to fit JobEvent.Detail.
func noteDetail(note string) string {
	if len(note) > maxEventDetail {
		note = strings.ToValidUTF8(note[:maxEventDetail], "")
	}
	return note
}
