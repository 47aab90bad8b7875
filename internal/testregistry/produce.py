# Produces the batches of a JSON spec on stdin with confluent-kafka's
# serializers (internal/testregistry's Produce).
import base64, importlib, json, os, sys, tempfile
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
    elif b["format"] == "protobuf":
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
        from google.protobuf.timestamp_pb2 import Timestamp
        import grpc_tools
        from grpc_tools import protoc

        out = tempfile.mkdtemp()
        name = "sluice_test_%d" % len(sys.modules)
        with open(os.path.join(out, name + ".proto"), "w") as f:
            f.write(b["schema"])
        include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
        if protoc.main(["protoc", "-I" + out, "-I" + include, "--python_out=" + out, name + ".proto"]) != 0:
            sys.exit("protoc failed")
        sys.path.insert(0, out)
        mod = importlib.import_module(name + "_pb2")
        scope.update({k: getattr(mod, k) for k in dir(mod) if not k.startswith("_")})
        from google.protobuf.wrappers_pb2 import StringValue
        scope["Timestamp"], scope["StringValue"] = Timestamp, StringValue
        ser = ProtobufSerializer(getattr(mod, b["message"]), registry, {"use.deprecated.format": False})
    elif b["format"] == "json_schema":
        ser = JSONSerializer(b["schema"], registry)
    else:
        sys.exit("unknown format " + b["format"])
    for expr in b["records"]:
        value = eval(expr, scope)
        key = str(value[o["KeyField"]]).encode() if o.get("KeyField") else None
        producer.produce(topic, ser(value, ctx), key=key, on_delivery=delivered)
if producer.flush(60) != 0:
    sys.exit("messages not delivered within 60 s")
if errors:
    sys.exit("delivery failed: " + "; ".join(errors))
