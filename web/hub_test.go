package web

import (
	"io"
	"log/slog"
	"testing"

	"github.com/gpuportal/gpuportal/app"
)

// TestBroadcastSkipsRepeats sends an update only when it differs from the
// topic's last one of its type, and forgets the last one when the topic
// loses its followers.
func TestBroadcastSkipsRepeats(t *testing.T) {
	t.Parallel()
	s := &Server{cfg: Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, hub: newHub(nil)}
	c := newClient(&app.User{Name: "alice"}, nil)
	s.hub.add(c)
	s.hub.follow(c, "jct")
	pending := func() int { return len(c.next()) }
	steps := []struct {
		name string
		m    wsOut
		want int
	}{
		{"first update", wsOut{Topic: "jct", Type: "update", Data: 1}, 1},
		{"the same again", wsOut{Topic: "jct", Type: "update", Data: 1}, 0},
		{"another type, same data", wsOut{Topic: "jct", Type: "lanes", Data: 1}, 1},
		{"changed data", wsOut{Topic: "jct", Type: "update", Data: 2}, 1},
	}
	for _, st := range steps {
		s.broadcast([]*wsClient{c}, st.m)
		if got := pending(); got != st.want {
			t.Errorf("%s: %d messages queued, want %d", st.name, got, st.want)
		}
	}
	s.hub.unfollow(c, "jct")
	s.hub.follow(c, "jct")
	s.broadcast([]*wsClient{c}, wsOut{Topic: "jct", Type: "update", Data: 2})
	if got := pending(); got != 1 {
		t.Errorf("after following anew: %d messages queued, want 1", got)
	}
}

// TestSendCoalescesPerTopicAndType keeps only the newest unsent message of
// each topic and type, oldest topic first.
func TestSendCoalescesPerTopicAndType(t *testing.T) {
	t.Parallel()
	c := newClient(&app.User{Name: "alice"}, nil)
	c.send(wsOut{Topic: "gpus", Type: "update", Data: 1})
	c.send(wsOut{Topic: "jct", Type: "update", Data: 1})
	c.send(wsOut{Topic: "gpus", Type: "update", Data: 2})
	c.send(wsOut{Topic: "gpus", Type: "lanes", Data: 3})
	got := c.next()
	if len(got) != 3 || got[0].Topic != "gpus" || got[0].Data != 2 || got[1].Topic != "jct" || got[2].Type != "lanes" {
		t.Errorf("pending = %+v", got)
	}
	if len(c.next()) != 0 {
		t.Error("messages left after next")
	}
}
