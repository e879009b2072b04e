# The warpgroup-MMA kernels keep their products overlapped: ptxas -v reports (C7515 .. C7520)
# "Potential Performance Loss: wgmma.mma_async instructions are serialized" when a product sits
# behind a thread-dependent test, in a loop ptxas unrolls with a remainder, or after accumulator
# writes the fence does not order (docs/cuda.md). Compiles each SOURCE for sm_90a, needs no GPU.
foreach(source ${SOURCES})
  execute_process(COMMAND ${NVCC} -O3 -DNDEBUG -std=c++20 --generate-code=arch=compute_90a,code=sm_90a -I ${SRC}
                          -Xptxas -v -c ${SRC}/${source} -o ${WORK}/wgmma_check.o
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${source}: nvcc failed (${rc}): ${err}")
  endif()
  string(REGEX MATCHALL "\\(C75[0-9][0-9]\\)[^\n]*" found "${out}${err}")
  if(found)
    list(JOIN found "\n" lines)
    message(FATAL_ERROR "${source}: ptxas serializes warpgroup MMA:\n${lines}")
  endif()
  string(REGEX MATCHALL "Compiling entry function '[^']*' for 'sm_90a'" kernels "${out}${err}")
  list(LENGTH kernels count)
  if(count EQUAL 0)
    message(FATAL_ERROR "${source}: ptxas compiled no kernel for sm_90a: the check saw nothing")
  endif()
  message(STATUS "${source}: ${count} kernels for sm_90a, no warpgroup MMA serialized")
endforeach()
