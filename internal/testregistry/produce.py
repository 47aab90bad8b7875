# Produces the batches of a JSON spec on stdin with confluent-kafka's
# serializers (internal/testregistry's Produce).
import base64, json, sys
from datetime import datetime, date, time, timezone
from decimal import Decimal
from uuid import UUID

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

spec = json.load(sys.stdin)
o = spec["options"]
conf = {"url": o["Registry"]}
if o.get("Username"):
    conf["basic.auth.user.info"] = o["Username"] + ":" + o["Password"]
if o.get("Token"):
    conf["bearer.auth.credentials.source"] = "STATIC_TOKEN"
    conf["bearer.auth.token"] = o["Token"]
    # Confluent Cloud's headers, which the client requires with a token.
    conf["bearer.auth.logical.cluster"] = "lsrc-test"
    conf["bearer.auth.identity.pool.id"] = "pool-test"
registry = SchemaRegistryClient(conf)
producer = Producer({"bootstrap.servers": o["Brokers"], "linger.ms": 5})
topic = o["Topic"]
ctx = SerializationContext(topic, MessageField.VALUE)
scope = {"datetime": datetime, "date": date, "time": time, "timezone": timezone, "Decimal": Decimal, "UUID": UUID}
errors = []


def delivered(err, _msg):
    if err is not None:
        errors.append(str(err))


for b in spec["batches"]:
    for raw in b.get("raw") or []:
        producer.produce(topic, base64.b64decode(raw), on_delivery=delivered)
    if not b.get("records"):
        continue
    if b["format"] == "avro":
        ser = AvroSerializer(registry, b["schema"])
    elif b["format"] == "json_schema":
        ser = JSONSerializer(b["schema"], registry)
    else:
        sys.exit("unknown format " + b["format"])
    for expr in b["records"]:
        producer.produce(topic, ser(eval(expr, scope), ctx), on_delivery=delivered)
if producer.flush(60) != 0:
    sys.exit("messages not delivered within 60 s")
if errors:
    sys.exit("delivery failed: " + "; ".join(errors))
