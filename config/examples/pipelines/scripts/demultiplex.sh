#!/bin/bash
# Script files are templated like inline scripts (parameters, run id, date).
# A parameter taken with :q (below) is one shell word: whoever triggers a run chooses its value.
set -euo pipefail
demultiplex --flowcell ${params.flowcell:q} --out "fastq/${run.id}"
