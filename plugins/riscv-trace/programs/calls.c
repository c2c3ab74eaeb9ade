/* Recursion and calls through a function-pointer table: jal, jalr, ret. */
#include "start.h"

static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
static int twice(int n) { return 2 * n; }
static int square(int n) { return n * n; }
static int negate(int n) { return -n; }

static int (*const ops[])(int) = { twice, square, negate, fib };

int main(void)
{
    int acc = fib(9);
    for (int i = 0; i < 12; i++)
        acc += ops[i & 3](i);
    return acc & 0x7f;
}
