"""Queue names the deployment, the local stack and the handlers agree on (``infra/`` creates them with these
names; ``engram serve`` creates them in moto). Each source queue has a dead-letter queue that receives a message
after ``Settings.max_receives`` receives (the redrive policy's ``maxReceiveCount``)."""

INGEST_QUEUE = "engram-ingest"
EMBED_QUEUE = "engram-embed"
INGEST_DLQ = "engram-ingest-dlq"
EMBED_DLQ = "engram-embed-dlq"
