// Package testkafka starts a real Apache Kafka broker (KRaft mode, one
// process acting as broker and controller) for tests and benchmarks, from
// the jars scripts/install-kafka puts in the sluice cache directory. A test
// package starts one broker in TestMain and shares it between its tests.
package testkafka
