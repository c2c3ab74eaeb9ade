#!/usr/bin/env python3
# A Fast Models style AArch64 trace of call chains 100 deep (each level:
# stp of the frame record, mov x29, bl; then ldp and ret back up), repeated
# to about the size asked: gen_chains.py BYTES OUT.tarmac
import sys
target=int(sys.argv[1]); out=open(sys.argv[2],'w',buffering=1<<22)
t=1; sp=0x80000000; size=0
def w(s):
    global size
    out.write(s); size+=len(s)
def insn(addr,enc,text,regs=(),mem=()):
    global t
    w(f"{t} clk IT ({t}) {addr:08x} {enc:08x} O EL1h_n : {text}\n")
    for a,v in mem: w(f"{t} clk MW8 {a:08x} {v:016x}\n")
    for r,v in regs: w(f"{t} clk R {r} {v:016x}\n")
    t+=1
w(f"0 clk R SP_EL0 {sp:016x}\n")
depth=100
while size<target:
    insn(0x1000,0x94000400,"bl #0x2000",[("X30",0x1004)])
    for k in range(depth):
        sp-=16; insn(0x2000,0xa9bf7bfd,"stp x29, x30, [sp, #-0x10]!",[("SP_EL0",sp)],[(sp,0x80000000+k),(sp+8,0x2008)])
        insn(0x2004,0x910003fd,"mov x29, sp",[("X29",sp)])
        if k+1<depth: insn(0x2008-4+4,0x97fffffe,"bl #0x2000",[("X30",0x200c)])
        else: insn(0x2008,0xd503201f,"nop")
    for k in range(depth):
        sp+=16; insn(0x200c,0xa8c17bfd,"ldp x29, x30, [sp], #0x10",[("X29",0),("X30",0x200c),("SP_EL0",sp)])
        insn(0x2010,0xd65f03c0,"ret")
    insn(0x1004,0x91000400,"add x0, x0, #1",[("X0",t)])
    insn(0x1008,0x17fffffe,"b #0x1000")
