package cluster

import (
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkaKeyPartitioner is Kafka's default partitioner for records with a
// key: murmur2 of the key, its sign bit cleared, modulo the partitions
// (the Java client's BuiltInPartitioner and franz-go's KafkaHasher agree).
// Its topic partitioners keep state for records without a key, so each
// call takes its own; a key is never nil here (an empty key is hashed, as
// Kafka hashes it).
var kafkaKeyPartitioner = kgo.StickyKeyPartitioner(nil)

// KafkaKeyPartition is the partition that Kafka's default partitioner
// gives a record with key in a topic of partitions partitions.
func KafkaKeyPartition(key []byte, partitions int32) int32 {
	if partitions <= 0 {
		return -1
	}
	if key == nil {
		key = []byte{}
	}
	return int32(kafkaKeyPartitioner.ForTopic("").Partition(&kgo.Record{Key: key}, int(partitions)))
}

// KafkaKeyPartitioner returns KafkaKeyPartition as a function that reuses
// one partitioner, for checking many keys at once; it is not safe for
// concurrent use.
func KafkaKeyPartitioner() func(key []byte, partitions int32) int32 {
	tp := kgo.StickyKeyPartitioner(nil).ForTopic("")
	rec := &kgo.Record{}
	return func(key []byte, partitions int32) int32 {
		if partitions <= 0 {
			return -1
		}
		if key == nil {
			key = []byte{}
		}
		rec.Key = key
		return int32(tp.Partition(rec, int(partitions)))
	}
}
