"""The local AWS stack: a moto server provisioned like the deployment (S3 drop bucket, SQS queues with dead-letter
queues, the bucket notification, the DSN secret), Lambda event shapes, and the event pump that feeds the Chalice
handlers from the queues and fires the schedules — what ``engram serve`` runs on one machine."""
