/* skip_without_cuda.h — included first by every tests/test_cuda_*.c. Built
 * without the CUDA backend (no VQ_TEST_HAVE_CUDA) the test is only this main,
 * which reports a skip: exit 77, the tests' SKIP_RETURN_CODE. */
#ifndef VQ_TEST_HAVE_CUDA
#include <stdio.h>
int main(void)
{
    printf("SKIP: built without CUDA\n");
    return 77;
}
#endif
