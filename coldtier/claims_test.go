package coldtier

import (
	"testing"

	"github.com/apache/iceberg-go"
)

func TestSpans(t *testing.T) {
	var s spans
	s = s.add(10, 20).add(30, 40).add(20, 25).add(0, 5).add(24, 31)
	if got := s.String(); got != "0-5,10-40" {
		t.Fatalf("spans %s, want 0-5,10-40", got)
	}
	for x, want := range map[int64]bool{-1: false, 0: true, 4: true, 5: false, 9: false, 10: true, 39: true, 40: false} {
		if s.contains(x) != want {
			t.Errorf("contains(%d) = %v", x, !want)
		}
	}
	if got := s.minus(spans{{3, 12}, {20, 22}, {39, 50}}).String(); got != "0-3,12-20,22-39" {
		t.Errorf("minus: %s", got)
	}
	if !s.overlaps(spans{{39, 41}}) || s.overlaps(spans{{5, 10}, {40, 45}}) {
		t.Error("overlaps")
	}
	p, err := parseSpans(s.String())
	if err != nil || p.String() != s.String() {
		t.Errorf("parse: %v %v", p, err)
	}
	if _, err := parseSpans("1-x"); err == nil {
		t.Error("parse of 1-x: no error")
	}
}

func TestRunClaims(t *testing.T) {
	known, err := readClaims(iceberg.Properties{propClaims + "kafka/t/0/x": "other:100-150;me:0-100", "unrelated": "1"})
	if err != nil {
		t.Fatal(err)
	}
	rc := newRunClaims("me", known)
	// A batch [90, 200) of this store: 90-99 its own (kept: a message of
	// two runs), 100-149 the other's (skipped), 150-199 new.
	kept := 0
	for off := int64(90); off < 200; off++ {
		if rc.keep("kafka/t/0/x@90-200", off) {
			kept++
		}
	}
	if kept != 60 || rc.skipped != 50 {
		t.Fatalf("kept %d skipped %d, want 60 and 50", kept, rc.skipped)
	}
	if !rc.keep(nil, nil) || !rc.keep("no tag", int64(1)) {
		t.Error("rows without a source must be kept")
	}
	now, _ := readClaims(iceberg.Properties{propClaims + "kafka/t/0/x": "other:100-150;me:0-100"})
	props, conflict := rc.update(now)
	if conflict || props[propClaims+"kafka/t/0/x"] != "me:0-100,150-200;other:100-150" {
		t.Fatalf("update: %v %v", props, conflict)
	}
	// Another writer committed 180-190 meanwhile: the run's files hold
	// those rows, so it must write them again.
	now, _ = readClaims(iceberg.Properties{propClaims + "kafka/t/0/x": "other:100-150;third:180-190"})
	if _, conflict := rc.update(now); !conflict {
		t.Fatal("an overlapping claim made meanwhile is not a conflict")
	}
	// A claim meanwhile on other offsets is not.
	now, _ = readClaims(iceberg.Properties{propClaims + "kafka/t/0/x": "other:100-150;third:200-300"})
	if props, conflict := rc.update(now); conflict || props[propClaims+"kafka/t/0/x"] != "me:90-100,150-200;other:100-150;third:200-300" {
		t.Fatalf("update: %v %v", props, conflict)
	}
}
