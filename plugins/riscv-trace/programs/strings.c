/* String handling and a switch (jump table): byte loads, indirect jumps. */
#include "start.h"

static char buf[64];

static int classify(char c)
{
    switch (c) {
    case 'a': case 'e': case 'i': case 'o': case 'u': return 1;
    case ' ': return 2;
    case '.': return 3;
    case ',': return 4;
    case '!': return 5;
    default: return 0;
    }
}

int main(void)
{
    const char *s = "the quick brown fox jumps over the lazy dog, twice!";
    int n = 0;
    while (s[n]) {
        buf[n] = s[n];
        n++;
    }
    for (int i = 0, j = n - 1; i < j; i++, j--) {
        char t = buf[i];
        buf[i] = buf[j];
        buf[j] = t;
    }
    int counts[6] = { 0 };
    for (int i = 0; i < n; i++)
        counts[classify(buf[i])]++;
    return (counts[1] * 3 + counts[2] + counts[4] * 7) & 0x7f;
}
