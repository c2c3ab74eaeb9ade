/* Freestanding start-up for the fixture programs: no C library, so the
 * ELF stays small and the executed stream is the program's own code.
 * main's result becomes the exit status (Linux exit syscall, 93). */
int main(void);

static inline long sys_exit(long code)
{
    register long a0 __asm__("a0") = code;
    register long a7 __asm__("a7") = 93;
    __asm__ volatile("ecall" : "+r"(a0) : "r"(a7) : "memory");
    return a0;
}

void _start(void)
{
    sys_exit(main());
    for (;;) {
    }
}
