# What ptxas -v says about kernels that must stay fast (no GPU needed; each SOURCE compiled for
# sm_90a):
# - no "(C7515)" .. "(C7520) Potential Performance Loss: wgmma.mma_async instructions are
#   serialized": a warpgroup MMA behind a thread-dependent test, in a loop ptxas unrolls with a
#   remainder, or after accumulator writes the fence does not order (docs/cuda.md);
# - NO_SPILL (optional): a regex of mangled kernel names that must not spill registers (the
#   decode kernels lost 5-50% each time a change made them spill; docs/perf.md).
foreach(source ${SOURCES})
  execute_process(COMMAND ${NVCC} -O3 -DNDEBUG -std=c++20 --generate-code=arch=compute_90a,code=sm_90a -I ${SRC}
                          -Xptxas -v -c ${SRC}/${source} -o /dev/null
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${source}: nvcc failed (${rc}): ${err}")
  endif()
  set(report "${out}${err}")
  string(REGEX MATCHALL "\\(C75[0-9][0-9]\\)[^\n]*" found "${report}")
  if(found)
    list(JOIN found "\n" lines)
    message(FATAL_ERROR "${source}: ptxas serializes warpgroup MMA:\n${lines}")
  endif()
  string(REGEX MATCHALL "Compiling entry function '[^']*' for 'sm_90a'" kernels "${report}")
  list(LENGTH kernels count)
  if(count EQUAL 0)
    message(FATAL_ERROR "${source}: ptxas compiled no kernel for sm_90a: the check saw nothing")
  endif()
  set(checked 0)
  if(NO_SPILL)
    string(REPLACE "\n" ";" report_lines "${report}")
    set(kernel "")
    foreach(line IN LISTS report_lines)
      if(line MATCHES "Compiling entry function '([^']*)'")
        set(kernel "${CMAKE_MATCH_1}")
      elseif(line MATCHES "([0-9]+) bytes spill stores")
        set(stores "${CMAKE_MATCH_1}")  # before the next MATCHES resets it
        if(kernel MATCHES "${NO_SPILL}")
          math(EXPR checked "${checked} + 1")
          if(NOT stores EQUAL 0)
            message(FATAL_ERROR "${source}: ${kernel} spills: ${line}")
          endif()
        endif()
      endif()
    endforeach()
    if(checked EQUAL 0)
      message(FATAL_ERROR "${source}: no kernel matches NO_SPILL '${NO_SPILL}': the check saw nothing")
    endif()
  endif()
  message(STATUS "${source}: ${count} kernels for sm_90a, no warpgroup MMA serialized, ${checked} checked for spills")
endforeach()
