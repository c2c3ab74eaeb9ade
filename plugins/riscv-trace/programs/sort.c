/* Insertion sort and a checksum: nested loops, conditional branches. */
#include "start.h"

static int data[48];

int main(void)
{
    unsigned x = 12345;
    for (int i = 0; i < 48; i++) {
        x = x * 1103515245u + 12345u;
        data[i] = (int)(x >> 16) % 1000;
    }
    for (int i = 1; i < 48; i++) {
        int v = data[i], j = i - 1;
        while (j >= 0 && data[j] > v) {
            data[j + 1] = data[j];
            j--;
        }
        data[j + 1] = v;
    }
    int sum = 0;
    for (int i = 0; i < 48; i++)
        sum += data[i] * (i & 3);
    return sum & 0x7f;
}
