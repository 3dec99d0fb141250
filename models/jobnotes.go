package models

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
)

// maxEventDetail is the size of JobEvent.Detail.
const maxEventDetail = 512

// AddJobNote adds a line to a job's history without changing its state
// (engine.JobNoter): the event carries the job's current state and note
// as its detail, cut to fit.
func (s *Store) AddJobNote(ctx context.Context, id int64, note string, at time.Time) error {
	return addNote(s.db.WithContext(ctx), id, 0, note, at)
}

// addNote adds note, cut to fit, to job id's history through db, with the
// job's current state and the run it is about (0: none).
func addNote(db *gorm.DB, id, run int64, note string, at time.Time) error {
	var j Job
	if err := db.Select("id", "state").First(&j, id).Error; err != nil {
		return fmt.Errorf("note on job %d: %w", id, err)
	}
	if len(note) > maxEventDetail {
		note = strings.ToValidUTF8(note[:maxEventDetail], "")
	}
	e := JobEvent{JobID: id, At: at, State: j.State, Detail: note, Run: run}
	if err := db.Create(&e).Error; err != nil {
		return fmt.Errorf("note on job %d: %w", id, err)
	}
	return nil
}
