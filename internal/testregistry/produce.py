# Produces the batches of a JSON spec on stdin with confluent-kafka's
# serializers (internal/testregistry's Produce).
import base64, importlib, json, os, sys, tempfile
from datetime import datetime, date, time, timezone
from decimal import Decimal
from uuid import UUID

from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
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
# Without brokers the serialized messages are written to stdout instead,
# one base64 line each (Serialize), for sources other than Kafka.
producer = Producer({"bootstrap.servers": o["Brokers"], "linger.ms": 5}) if o.get("Brokers") else None
topic = o["Topic"]
ctx = SerializationContext(topic, MessageField.VALUE)
scope = {"datetime": datetime, "date": date, "time": time, "timezone": timezone, "Decimal": Decimal, "UUID": UUID}
errors = []


def delivered(err, _msg):
    if err is not None:
        errors.append(str(err))


def send(value, key=None):
    if producer is None:
        sys.stdout.write(base64.b64encode(value).decode() + "\n")
        return
    producer.produce(topic, value, key=key, on_delivery=delivered)


for b in spec["batches"]:
    for raw in b.get("raw") or []:
        send(base64.b64decode(raw))
    if not b.get("records"):
        continue
    refs = b.get("references") or []
    # Avro and JSON Schema references are registered before the schema
    # that names them; the serializer then uses that registered version.
    latest, schema = {}, b.get("schema")
    if refs and b["format"] != "protobuf":
        stype = {"avro": "AVRO", "json_schema": "JSON"}[b["format"]]
        named = []
        for r in refs:
            registry.register_schema(r["subject"], Schema(r["schema"], stype))
            version = registry.get_latest_version(r["subject"]).version
            named.append(SchemaReference(r["name"], r["subject"], version))
        schema = Schema(b["schema"], stype, named)
        registry.register_schema(topic + "-value", schema)
        latest = {"auto.register.schemas": False, "use.latest.version": True}
    if b["format"] == "avro":
        ser = AvroSerializer(registry, schema, conf=latest)
    elif b["format"] == "protobuf":
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
        from google.protobuf.timestamp_pb2 import Timestamp
        import grpc_tools
        from grpc_tools import protoc

        out = tempfile.mkdtemp()
        name = "sluice_test_%d" % len(sys.modules)
        with open(os.path.join(out, name + ".proto"), "w") as f:
            f.write(b["schema"])
        # The imported files, at their import paths.
        for r in refs:
            os.makedirs(os.path.dirname(os.path.join(out, r["name"])), exist_ok=True)
            with open(os.path.join(out, r["name"]), "w") as f:
                f.write(r["schema"])
        include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
        # google/type/*.proto (googleapis-common-protos, which
        # confluent-kafka's Protobuf support installs), beside the
        # well-known types.
        from google.type import date_pb2, timeofday_pb2
        common = os.path.dirname(os.path.dirname(os.path.dirname(date_pb2.__file__)))
        files = [name + ".proto"] + [r["name"] for r in refs]
        if protoc.main(["protoc", "-I" + out, "-I" + include, "-I" + common, "--python_out=" + out] + files) != 0:
            sys.exit("protoc failed")
        sys.path.insert(0, out)
        mod = importlib.import_module(name + "_pb2")
        for m in [importlib.import_module(r["name"][: -len(".proto")].replace("/", ".") + "_pb2") for r in refs] + [mod]:
            scope.update({k: getattr(m, k) for k in dir(m) if not k.startswith("_")})
        from google.protobuf.wrappers_pb2 import StringValue
        scope["Timestamp"], scope["StringValue"] = Timestamp, StringValue
        scope["Date"], scope["TimeOfDay"] = date_pb2.Date, timeofday_pb2.TimeOfDay
        subjects = {r["name"]: r["subject"] for r in refs}
        ser = ProtobufSerializer(getattr(mod, b["message"]), registry, {
            "use.deprecated.format": False,
            "reference.subject.name.strategy": lambda _ctx, dep: subjects.get(dep.name, dep.name),
        })
    elif b["format"] == "json_schema":
        ser = JSONSerializer(schema, registry, conf=latest)
    else:
        sys.exit("unknown format " + b["format"])
    for expr in b["records"]:
        value = eval(expr, scope)
        key = str(value[o["KeyField"]]).encode() if o.get("KeyField") else None
        send(ser(value, ctx), key)
if producer is None:
    sys.exit(0)
if producer.flush(60) != 0:
    sys.exit("messages not delivered within 60 s")
if errors:
    sys.exit("delivery failed: " + "; ".join(errors))
