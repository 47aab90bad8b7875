package cluster

import (
	"os"
	"strings"
	"testing"
)

// TestParsePage reads the walkthrough's own page: every code block is a
// step, the servers it starts are stopped by its end.
func TestParsePage(t *testing.T) {
	text, err := os.ReadFile("../../" + page)
	if err != nil {
		t.Fatal(err)
	}
	steps, err := parse(string(text))
	if err != nil {
		t.Fatal(err)
	}
	running := map[string]bool{}
	kinds := map[string]int{}
	for _, s := range steps {
		kinds[s.kind]++
		switch s.kind {
		case "start":
			running[s.names[0]] = true
		case "stop":
			for _, n := range s.names {
				if !running[n] {
					t.Errorf("line %d stops %s, which is not running", s.line, n)
				}
				delete(running, n)
			}
		}
	}
	if len(running) > 0 {
		t.Errorf("started and never stopped: %v", running)
	}
	if kinds["install"] != 1 || kinds["run"] == 0 || kinds["start"] == 0 {
		t.Errorf("steps by kind: %v", kinds)
	}
	// TestWalkthrough requires, rather than runs, what the install step
	// installs: the step names each of those installs.
	for _, s := range steps {
		if s.kind != "install" {
			continue
		}
		for _, script := range []string{"scripts/install-kafka", "scripts/install-s3", "scripts/install-iceberg-rest", "scripts/install-trino",
			"scripts/build-trino-connector", "PYTHON=$(scripts/install-iceberg-readers)"} {
			if !strings.Contains(s.code, script) {
				t.Errorf("line %d: the install step lacks %s", s.line, script)
			}
		}
	}
}

// TestParseRefuses: a block a reader would paste but the test would not
// run, and a marker the test cannot follow, are errors.
func TestParseRefuses(t *testing.T) {
	for name, page := range map[string]string{
		"block without a marker":    "text\n\n```sh\necho hi\n```\n",
		"marker without a block":    "<!-- walkthrough: run -->\nsome text\n",
		"marker at the end":         "<!-- walkthrough: run -->\n",
		"start without until":       "<!-- walkthrough: start a -->\n```sh\nsleep 1\n```\n",
		"unknown kind":              "<!-- walkthrough: walk -->\n```sh\necho\n```\n",
		"unknown field":             "<!-- walkthrough: run; want: x -->\n```sh\necho\n```\n",
		"block that does not end":   "<!-- walkthrough: run -->\n```sh\necho\n",
		"stop without names":        "<!-- walkthrough: stop -->\n",
		"two blocks for one marker": "<!-- walkthrough: run -->\n```sh\necho\n```\n```sh\necho\n```\n",
	} {
		if steps, err := parse(page); err == nil {
			t.Errorf("%s: parsed as %+v", name, steps)
		}
	}
}

// TestParseFields: expectations (with \t as a tab), until, names.
func TestParseFields(t *testing.T) {
	steps, err := parse("<!-- walkthrough: run; expect: a\\tb; expect: c -->\n```sh\necho 'a\tb c'\n```\n\n" +
		"<!-- walkthrough: start s3-node1; until: \"msg\":\"serving\" -->\n```sh\nserve\n```\n<!-- walkthrough: stop s3-node1 -->\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 3 {
		t.Fatalf("%d steps: %+v", len(steps), steps)
	}
	if got := strings.Join(steps[0].expect, "|"); got != "a\tb|c" || steps[0].code != "echo 'a\tb c'\n" {
		t.Errorf("run step: expect %q, code %q", got, steps[0].code)
	}
	if s := steps[1]; s.kind != "start" || s.names[0] != "s3-node1" || s.until != `"msg":"serving"` || s.code != "serve\n" {
		t.Errorf("start step: %+v", s)
	}
	if s := steps[2]; s.kind != "stop" || len(s.names) != 1 {
		t.Errorf("stop step: %+v", s)
	}
}
