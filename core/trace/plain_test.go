package trace

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
)

// FuzzPlainReader holds plainReader to encoding/csv's reading (Comment
// '#', ReuseRecord) of every input plainCSV accepts: the same records,
// lines and errors, in order.
func FuzzPlainReader(f *testing.F) {
	for _, s := range []string{
		"a,b,c\n1,2,3\n",
		"# note\n\na,b\n1,2\n\n#x\n3,4",
		"a,b\n1,2,3\n",
		"a,b\n1\n",
		"\n\n",
		"",
		"#only\n",
		"a,,\n,,\n ,, \n",
		"\ufeffjob_id,num_gpu\n1,2\n",
		"a\n#\n b\n",
		"a,b\r\n1,2\r\n\r\n3,4\r",
		"a,b\r\n#c\r\n1,2\n\r",
		"a\r",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !plainCSV([]byte(in)) {
			return
		}
		want := csvRecords(in)
		got := plainRecords(in)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("input %q:\nplain %q\ncsv   %q", in, got, want)
		}
	})
}

// csvRecords and plainRecords list what each reader returns, one string
// a record or error, until EOF or the first error.
func csvRecords(in string) []string {
	r := csv.NewReader(strings.NewReader(in))
	r.Comment, r.ReuseRecord = '#', true
	var out []string
	for {
		rec, err := r.Read()
		if err != nil {
			return append(out, describeErr(err))
		}
		line, _ := r.FieldPos(0)
		out = append(out, fmt.Sprintf("%d:%q", line, rec))
	}
}

func plainRecords(in string) []string {
	p := &plainReader{s: in}
	var out []string
	for {
		rec, line, err := p.read()
		if err != nil {
			return append(out, describeErr(err))
		}
		out = append(out, fmt.Sprintf("%d:%q", line, rec))
	}
}

func describeErr(err error) string {
	if err == io.EOF {
		return "EOF"
	}
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return fmt.Sprintf("line %d: %v", pe.Line, pe.Err)
	}
	return err.Error()
}

// TestPlainCSV: only files without quotes, and with carriage returns
// only at line ends, are read by plainReader.
func TestPlainCSV(t *testing.T) {
	for _, c := range []struct {
		in   string
		want bool
	}{
		{"a,b\n1,2\n", true},
		{"", true},
		{"a,b\r\n1,2\r\n", true},
		{"a,b\r\n1,2\r", true},
		{"a,b\r\n1\r,2\r\n", false},
		{"a,b\r\r\n", false},
		{"a,b\n\"1\",2\n", false},
		{"a,b\n1\"x,2\n", false},
	} {
		if got := plainCSV([]byte(c.in)); got != c.want {
			t.Errorf("plainCSV(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

// FuzzReadFileAsRead holds ReadFile (which splits plain files itself)
// to Read over a plain reader (encoding/csv): the same trace or the same
// error, for every format.
func FuzzReadFileAsRead(f *testing.F) {
	f.Add("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,0,606,vgg19,164,30\n1,8,30,133,vgg11,147,23\n")
	f.Add("# c\n\njob_id,num_gpu,submit_time,duration\n3,2,1e3,0.5\n3,1,2,2\n")
	f.Add("job_id,num_gpu,submit_time,duration\n3,2,1,5\n4,2\n")
	f.Add("id,gpus,submit_s,duration_s\n1,1,0,10\n")
	f.Add("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\np0,12000,16384,1,460,,LS,Running,0,12537496,0\n")
	f.Fuzz(func(t *testing.T, in string) {
		path := t.TempDir() + "/t.csv"
		if err := writeFile(path, in); err != nil {
			t.Fatal(err)
		}
		got, gerr := ReadFile(path, "")
		want, werr := Read(bytes.NewReader([]byte(in)), path, "")
		if fmt.Sprint(gerr) != fmt.Sprint(werr) {
			t.Fatalf("input %q: ReadFile: %v; Read: %v", in, gerr, werr)
		}
		if gerr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("input %q: ReadFile %+v, Read %+v", in, got, want)
		}
	})
}

func writeFile(path, data string) error { return os.WriteFile(path, []byte(data), 0o600) }

// TestIDSet: duplicates are found, with the line that used the ID first,
// whether the IDs so far increase or not.
func TestIDSet(t *testing.T) {
	tb := &table{name: "f.csv"}
	for _, c := range []struct {
		name string
		ids  []int64
		want string // the error of the last add, "" for none
	}{
		{"increasing", []int64{1, 2, 5, 9}, ""},
		{"repeat of the last", []int64{1, 2, 2}, "f.csv:3: column id: job id 2 already used on line 2"},
		{"repeat of an early one", []int64{1, 5, 9, 1}, "f.csv:4: column id: job id 1 already used on line 1"},
		{"decrease, then new", []int64{5, 3, 4, 6}, ""},
		{"decrease, then repeat", []int64{5, 3, 4, 6, 4}, "f.csv:5: column id: job id 4 already used on line 3"},
		{"decrease, then repeat of a first", []int64{5, 3, 5}, "f.csv:3: column id: job id 5 already used on line 1"},
		{"negative", []int64{-3, -1, -3}, "f.csv:3: column id: job id -3 already used on line 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newIDSet(2)
			var err error
			for i, id := range c.ids {
				if err != nil {
					t.Fatalf("add %d: %v before the last", i, err)
				}
				err = s.add(row{t: tb, line: i + 1}, "id", id)
			}
			if got := fmt.Sprint(err); c.want == "" && err != nil || c.want != "" && got != c.want {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}
