#!/bin/sh
# Startup script of the StreamingFront function (its Handler): Lambda Web Adapter (/opt/bootstrap, set as
# AWS_LAMBDA_EXEC_WRAPPER) runs it, waits until AWS_LWA_READINESS_CHECK_PATH answers on AWS_LWA_PORT, then proxies
# every function-URL request to it with response streaming. Dependencies come from the layer (/opt/python).
cd "${LAMBDA_TASK_ROOT:-/var/task}" || exit 1
export PYTHONPATH="${LAMBDA_TASK_ROOT:-/var/task}:/opt/python${PYTHONPATH:+:$PYTHONPATH}"
exec python3 -m chalicelib.api.streaming_front --port "${AWS_LWA_PORT:-8080}"
