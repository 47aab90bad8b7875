package stream

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestTopicIDsAskAgain: a topic just created answers its metadata with an
// error for a moment (LEADER_NOT_AVAILABLE), without its ID. A partition
// assigned then must not be labelled with the zero ID while other nodes
// (or this one, later) label it with the real one: the same message would
// be two sources, and a keyed table's changes of one partition would have
// no order between them. topicIDs asks again until the brokers give the
// ID, and fails rather than answer without it.
func TestTopicIDsAskAgain(t *testing.T) {
	id := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	answers := func(errored int) func(context.Context) (kadm.Metadata, error) {
		calls := 0
		return func(context.Context) (kadm.Metadata, error) {
			calls++
			d := kadm.TopicDetail{Topic: "events", ID: id}
			if calls <= errored {
				d = kadm.TopicDetail{Topic: "events", Err: kerr.LeaderNotAvailable}
			}
			return kadm.Metadata{Topics: kadm.TopicDetails{"events": d}}, nil
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	ids, err := topicIDs(ctx, []string{"events"}, answers(2))
	if err != nil {
		t.Fatalf("two errored answers, then the ID: %v", err)
	}
	if ids["events"] != id {
		t.Fatalf("topic ID %x, want %x", ids["events"], id)
	}

	_, err = topicIDs(ctx, []string{"events"}, answers(topicIDAttempts))
	if !errors.Is(err, kerr.LeaderNotAvailable) {
		t.Fatalf("no answer with the ID in %d attempts: error %v, want LEADER_NOT_AVAILABLE", topicIDAttempts, err)
	}

	// A broker older than topic IDs answers without error and without
	// one: every node keeps the zero ID alike.
	old := func(context.Context) (kadm.Metadata, error) {
		return kadm.Metadata{Topics: kadm.TopicDetails{"events": {Topic: "events"}}}, nil
	}
	if ids, err := topicIDs(ctx, []string{"events"}, old); err != nil || ids["events"] != ([16]byte{}) {
		t.Fatalf("a broker without topic IDs: %x, %v", ids["events"], err)
	}
}
