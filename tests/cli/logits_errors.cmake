# tetra logits: the output file's size and the exit codes of its errors (src/core/error.h).
set(model ${DATA}/golden/dense)
function(expect_exit code)
  execute_process(COMMAND ${TETRA} logits ${ARGN} RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  if(NOT rc EQUAL ${code})
    message(FATAL_ERROR "tetra logits ${ARGN}: exit ${rc}, expected ${code}: ${err}")
  endif()
  set(last_error "${err}" PARENT_SCOPE)
endfunction()

file(WRITE ${WORK}/logits_ok.json "[[1, 2, 3], [4, 5]]")
expect_exit(0 --model ${model} --tokens-file ${WORK}/logits_ok.json --out ${WORK}/logits_ok.f32 --prefill 2)
file(SIZE ${WORK}/logits_ok.f32 size)
if(NOT size EQUAL 5120)  # 5 positions x 256 vocab x 4 bytes
  message(FATAL_ERROR "logits file has ${size} bytes, expected 5120")
endif()

# --device cuda runs where a GPU is usable; elsewhere it fails (exit 1) saying why.
execute_process(COMMAND ${TETRA} logits --model ${model} --tokens-file ${WORK}/logits_ok.json --out ${WORK}/x.f32
                --device cuda RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT rc EQUAL 0 AND NOT (rc EQUAL 1 AND err MATCHES "built without the CUDA backend|CUDA device"))
  message(FATAL_ERROR "--device cuda: exit ${rc}, unclear message: ${err}")
endif()
file(WRITE ${WORK}/logits_bad_id.json "[[1, 2], [3, 256]]")
expect_exit(2 --model ${model} --tokens-file ${WORK}/logits_bad_id.json --out ${WORK}/x.f32)
if(NOT last_error MATCHES "sequence 1 position 1: token id 256")
  message(FATAL_ERROR "bad token id: unclear message: ${last_error}")
endif()
# a directory opens but cannot be read: it failed with exit code 1 and a stream error
expect_exit(2 --model ${model} --tokens-file ${WORK} --out ${WORK}/x.f32)
if(NOT last_error MATCHES "--tokens-file: '.*' is a directory")
  message(FATAL_ERROR "directory as --tokens-file: unclear message: ${last_error}")
endif()
file(WRITE ${WORK}/logits_bad_json.json "[[1, 2], \"x\"]")
expect_exit(2 --model ${model} --tokens-file ${WORK}/logits_bad_json.json --out ${WORK}/x.f32)
expect_exit(2 --model ${model} --tokens-file ${WORK}/logits_ok.json --out ${WORK}/x.f32 --kv-cache-dtype fp16)
expect_exit(2 --model ${model} --tokens-file ${WORK}/logits_ok.json --out ${WORK}/x.f32 --prefill 0)
expect_exit(3 --model ${DATA} --tokens-file ${WORK}/logits_ok.json --out ${WORK}/x.f32)
