#!/bin/bash
# Script files are templated like inline scripts (parameters, run id, date).
set -euo pipefail
demultiplex --flowcell "${params.flowcell}" --out "fastq/${run.id}"
