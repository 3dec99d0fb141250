package api

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// TestQueuesAppendJSONWritesEveryField fills every field of Queues and
// of what it holds, by reflection, with a value that is not its zero, and
// compares AppendJSON with encoding/json: a field added to Queues, Queue,
// QueueJob or Forecast and not to AppendJSON fails here, omitempty or
// not.
func TestQueuesAppendJSONWritesEveryField(t *testing.T) {
	var q Queues
	fill(t, reflect.ValueOf(&q).Elem(), 0)
	want, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	got, err := q.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("AppendJSON of every field set:\n%s\nwant (encoding/json):\n%s", got, want)
	}
}

// fill sets v, and every field, element and pointee below it, to a value
// other than its zero; depth tells each field's figures apart.
func fill(t *testing.T, v reflect.Value, depth int) {
	t.Helper()
	if v.Type() == reflect.TypeFor[time.Time]() {
		v.Set(reflect.ValueOf(time.Date(2026, 11, 29, 1, 2, 3, depth, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), depth*7+i+1)
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), depth+1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fill(t, v.Index(0), depth+1)
		fill(t, v.Index(1), depth+2)
	case reflect.String:
		v.SetString("s" + string(rune('a'+depth%26)))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(depth + 1))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(depth) + 0.5)
	default:
		t.Fatalf("fill: a field of kind %s: teach fill, and AppendJSON, to write it", v.Kind())
	}
}
