/* Calls where this library once answered differently from OpenCSD's
 * (issue 49, items 18-21), each in a child process of its own (a crash
 * there is reported, not fatal), printing what the library returned and
 * logged. The same lines from Debian's libopencsd1 (1.3.3) and from this
 * library show they behave alike (scripts/check.sh ctest; the crate's
 * tests run the cases through the exported functions).
 *
 * usage: api_diffs <etmv4-a64 snapshot dir> [case]
 *   Cases "stdio" and "stderr" write library text to stdout and stderr
 *   between the program's own printf lines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <opencsd/c_api/opencsd_c_api.h>

static const char *dir;
static unsigned char trace[4096], code0[4096], code1[4096];
static unsigned trace_len, code0_len, code1_len;
/* Where the snapshot's code0.bin and code1.bin are. */
#define CODE0_AT 0xFFFFFFC000080000ULL
#define CODE1_AT 0xFFFFFFC000010800ULL

static unsigned read_file(const char *name, unsigned char *buf, unsigned size)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    unsigned n = (unsigned)fread(buf, 1, size, f);
    fclose(f);
    return n;
}

/* The snapshot's ETMv4 (trace ID 0x15). */
static void etm_cfg(ocsd_etmv4_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->reg_idr0 = 0x20000EC1;
    c->reg_idr1 = 0x4100F411;
    c->reg_idr2 = 0x04001088;
    c->reg_configr = 0x00001081;
    c->reg_traceidr = 0x15;
    c->arch_ver = ARCH_V8;
    c->core_prof = profile_CortexA;
}

static void text_cb(const void *ctx, const char *msg, const int len)
{
    (void)ctx;
    printf("  text: %.*s", len, msg);
    if (len == 0 || msg[len - 1] != '\n')
        printf("\n");
}

static void last_err(void)
{
    ocsd_trc_index_t idx;
    uint8_t id;
    char msg[256];
    ocsd_err_t e = ocsd_get_last_err(&idx, &id, msg, sizeof msg);
    printf("  last error %d: %s\n", (int)e, msg);
}

static int n_elems, elem_resp = OCSD_RESP_CONT;

static ocsd_datapath_resp_t elem_cb(const void *ctx, const ocsd_trc_index_t idx, const uint8_t id,
                                    const ocsd_generic_trace_elem *e)
{
    (void)ctx; (void)idx; (void)id;
    n_elems++;
    /* WAIT on the last element only, once. */
    if (e->elem_type == OCSD_GEN_TRC_ELEM_EO_TRACE && elem_resp != OCSD_RESP_CONT) {
        int r = elem_resp;
        elem_resp = OCSD_RESP_CONT;
        return (ocsd_datapath_resp_t)r;
    }
    return OCSD_RESP_CONT;
}

static int mon_ops[4];

static void mon_cb(const void *ctx, const ocsd_datapath_op_t op, const ocsd_trc_index_t idx,
                   const void *pkt, const uint32_t size, const uint8_t *data)
{
    (void)ctx; (void)idx; (void)pkt; (void)size; (void)data;
    if (op >= 0 && op < 4)
        mon_ops[op]++;
}

static ocsd_datapath_resp_t pkt_cb(const void *ctx, const ocsd_datapath_op_t op, const ocsd_trc_index_t idx,
                                   const void *pkt)
{
    char text[512];
    (void)ctx;
    if (op == OCSD_OP_DATA && ocsd_pkt_str(OCSD_PROTOCOL_ETMV4I, pkt, text, sizeof text) == OCSD_OK)
        printf("  %u: %s\n", (unsigned)idx, text);
    return OCSD_RESP_CONT;
}

static int extra_bytes;

/* The snapshot's code; says it gave `extra_bytes` more than it did. */
static uint32_t mem_cb(const void *ctx, const ocsd_vaddr_t addr, const ocsd_mem_space_acc_t space,
                       const uint32_t req, uint8_t *buf)
{
    (void)ctx; (void)space;
    const unsigned char *src = NULL;
    uint64_t avail = 0;
    if (addr >= CODE0_AT && addr < CODE0_AT + code0_len) {
        src = code0 + (addr - CODE0_AT);
        avail = CODE0_AT + code0_len - addr;
    } else if (addr >= CODE1_AT && addr < CODE1_AT + code1_len) {
        src = code1 + (addr - CODE1_AT);
        avail = CODE1_AT + code1_len - addr;
    }
    uint32_t n = avail < req ? (uint32_t)avail : req;
    if (n == 0)
        return 0;
    memcpy(buf, src, n);
    return n + (uint32_t)extra_bytes;
}

/* A formatted tree with the snapshot's ETMv4 as a full decoder. */
static dcd_tree_handle_t etm_tree(uint32_t dfmt_flags)
{
    ocsd_etmv4_cfg c;
    unsigned char csid = 0;
    etm_cfg(&c);
    dcd_tree_handle_t t = ocsd_create_dcd_tree(OCSD_TRC_SRC_FRAME_FORMATTED, dfmt_flags);
    ocsd_err_t e = ocsd_dt_create_decoder(t, OCSD_BUILTIN_DCD_ETMV4I, OCSD_CREATE_FLG_FULL_DECODER, &c, &csid);
    if (e != OCSD_OK)
        printf("  create: %d\n", (int)e);
    ocsd_dt_set_gen_elem_outfn(t, elem_cb, NULL);
    return t;
}

/* Feeds the whole trace, then EOT; prints each response that is not CONT. */
static void feed(dcd_tree_handle_t t, uint32_t block)
{
    uint32_t pos = 0;
    ocsd_datapath_resp_t r = OCSD_RESP_CONT;
    while (pos < trace_len) {
        uint32_t used = 0, n = trace_len - pos < block ? trace_len - pos : block;
        r = ocsd_dt_process_data(t, OCSD_OP_DATA, pos, n, trace + pos, &used);
        pos += used;
        if (r != OCSD_RESP_CONT) {
            printf("  data at %u: resp %d, used %u\n", pos - used, (int)r, used);
            if (r >= OCSD_RESP_FATAL_NOT_INIT)
                return;
            /* WAIT: flush until the decoder has handed everything on. */
            for (int i = 0; i < 100 && r >= OCSD_RESP_WAIT && r < OCSD_RESP_FATAL_NOT_INIT; i++)
                r = ocsd_dt_process_data(t, OCSD_OP_FLUSH, 0, 0, NULL, NULL);
        }
    }
    r = ocsd_dt_process_data(t, OCSD_OP_EOT, 0, 0, NULL, NULL);
    printf("  eot: resp %d\n", (int)r);
    for (int i = 0; i < 100 && r >= OCSD_RESP_WAIT && r < OCSD_RESP_FATAL_NOT_INIT; i++) {
        r = ocsd_dt_process_data(t, OCSD_OP_FLUSH, 0, 0, NULL, NULL);
        printf("  flush: resp %d\n", (int)r);
    }
}

static void run(const char *c)
{
    ocsd_etmv4_cfg cfg;
    unsigned char csid = 0x99;
    etm_cfg(&cfg);
    if (!strcmp(c, "no_mem_acc")) {
        /* 20: a full decoder with no memory accessor. */
        ocsd_def_errlog_init(OCSD_ERR_SEV_ERROR, 1);
        ocsd_def_errlog_config_output(C_API_MSGLOGOUT_FLG_STDOUT, NULL);
        dcd_tree_handle_t t = etm_tree(OCSD_DFRMTR_FRAME_MEM_ALIGN);
        feed(t, 4096);
        printf("  elements %d\n", n_elems);
        last_err();
        ocsd_destroy_dcd_tree(t);
    } else if (!strcmp(c, "mem_align")) {
        /* 20: a memory-aligned tree takes only 16-byte multiples. */
        ocsd_def_errlog_init(OCSD_ERR_SEV_ERROR, 1);
        ocsd_def_errlog_config_output(C_API_MSGLOGOUT_FLG_STDOUT, NULL);
        dcd_tree_handle_t t = etm_tree(OCSD_DFRMTR_FRAME_MEM_ALIGN);
        ocsd_dt_add_callback_mem_acc(t, 0, ~0ULL, OCSD_MEM_SPACE_ANY, mem_cb, NULL);
        feed(t, 40);
        printf("  elements %d\n", n_elems);
        last_err();
        ocsd_destroy_dcd_tree(t);
    } else if (!strcmp(c, "log_ranges")) {
        /* 20: no accessor, nothing to list. */
        ocsd_def_errlog_init(OCSD_ERR_SEV_ERROR, 1);
        ocsd_def_errlog_config_output(C_API_MSGLOGOUT_FLG_STDOUT, NULL);
        dcd_tree_handle_t t = ocsd_create_dcd_tree(OCSD_TRC_SRC_FRAME_FORMATTED, OCSD_DFRMTR_FRAME_MEM_ALIGN);
        printf("  strprint_cb: %d\n", (int)ocsd_def_errlog_set_strprint_cb(t, NULL, text_cb));
        ocsd_tl_log_mapped_mem_ranges(t);
        printf("  (end)\n");
        ocsd_destroy_dcd_tree(t);
    } else if (!strcmp(c, "flags_0")) {
        /* 21: neither packet processor nor full decoder asked for. */
        dcd_tree_handle_t t = ocsd_create_dcd_tree(OCSD_TRC_SRC_FRAME_FORMATTED, OCSD_DFRMTR_FRAME_MEM_ALIGN);
        printf("  create: %d, csid 0x%x\n", (int)ocsd_dt_create_decoder(t, OCSD_BUILTIN_DCD_ETMV4I, 0, &cfg, &csid), csid);
        printf("  again with FULL_DECODER: %d\n",
               (int)ocsd_dt_create_decoder(t, OCSD_BUILTIN_DCD_ETMV4I, OCSD_CREATE_FLG_FULL_DECODER, &cfg, &csid));
        ocsd_destroy_dcd_tree(t);
    } else if (!strcmp(c, "null_csid")) {
        dcd_tree_handle_t t = ocsd_create_dcd_tree(OCSD_TRC_SRC_FRAME_FORMATTED, OCSD_DFRMTR_FRAME_MEM_ALIGN);
        fflush(stdout);
        printf("  create: %d\n",
               (int)ocsd_dt_create_decoder(t, OCSD_BUILTIN_DCD_ETMV4I, OCSD_CREATE_FLG_FULL_DECODER, &cfg, NULL));
        ocsd_destroy_dcd_tree(t);
    } else if (!strcmp(c, "bad_src_type")) {
        dcd_tree_handle_t t = ocsd_create_dcd_tree((ocsd_dcd_tree_src_t)5, 0);
        printf("  tree: %s\n", t ? "made" : "NULL");
        if (t) {
            printf("  create: %d\n",
                   (int)ocsd_dt_create_decoder(t, OCSD_BUILTIN_DCD_ETMV4I, OCSD_CREATE_FLG_FULL_DECODER, &cfg, &csid));
            ocsd_destroy_dcd_tree(t);
        }
    } else if (!strcmp(c, "stats_unknown_id")) {
        dcd_tree_handle_t t = etm_tree(OCSD_DFRMTR_FRAME_MEM_ALIGN);
        ocsd_decode_stats_t *s = NULL;
        printf("  stats 0x15: %d\n", (int)ocsd_dt_get_decode_stats(t, 0x15, &s));
        printf("  stats 0x33: %d\n", (int)ocsd_dt_get_decode_stats(t, 0x33, &s));
        printf("  reset 0x33: %d\n", (int)ocsd_dt_reset_decode_stats(t, 0x33));
        ocsd_destroy_dcd_tree(t);
    } else if (!strcmp(c, "remove_mem_acc_first")) {
        dcd_tree_handle_t t = etm_tree(OCSD_DFRMTR_FRAME_MEM_ALIGN);
        printf("  remove: %d\n", (int)ocsd_dt_remove_mem_acc(t, 0x1000, OCSD_MEM_SPACE_ANY));
        ocsd_destroy_dcd_tree(t);
    } else if (!strcmp(c, "config_output_first")) {
        printf("  config_output: %d\n", (int)ocsd_def_errlog_config_output(C_API_MSGLOGOUT_FLG_STDOUT, NULL));
        printf("  init: %d\n", (int)ocsd_def_errlog_init(OCSD_ERR_SEV_ERROR, 0));
        printf("  config_output: %d\n", (int)ocsd_def_errlog_config_output(C_API_MSGLOGOUT_FLG_STDOUT, NULL));
        printf("  init with logger: %d\n", (int)ocsd_def_errlog_init(OCSD_ERR_SEV_ERROR, 1));
        printf("  config_output: %d\n", (int)ocsd_def_errlog_config_output(C_API_MSGLOGOUT_FLG_STDOUT, NULL));
    } else if (!strcmp(c, "mem_cb_more")) {
        /* 21: a memory callback that says it gave more than was asked
         * (1.3.3 logs an error and stops decoding; 1.8.0 and this library
         * take what was asked for). */
        dcd_tree_handle_t t = etm_tree(OCSD_DFRMTR_FRAME_MEM_ALIGN);
        extra_bytes = 100;
        ocsd_dt_add_callback_mem_acc(t, 0, ~0ULL, OCSD_MEM_SPACE_ANY, mem_cb, NULL);
        feed(t, 4096);
        printf("  elements %d\n", n_elems);
        last_err();
        ocsd_destroy_dcd_tree(t);
    } else if (!strcmp(c, "err_str")) {
        static const int codes[] = {0, 4, 0x21, 0x22, 0x23, 42, 43, 44, 45, 46, 47, 0x50, 0x1234};
        for (unsigned i = 0; i < sizeof codes / sizeof codes[0]; i++) {
            char buf[128];
            ocsd_err_str((ocsd_err_t)codes[i], buf, sizeof buf);
            printf("  %d: %s\n", codes[i], buf);
        }
    } else if (!strcmp(c, "stderr")) {
        /* 19: init with an output logger alone: errors go to stderr. */
        printf("  init: %d\n", (int)ocsd_def_errlog_init(OCSD_ERR_SEV_ERROR, 1));
        dcd_tree_handle_t t = etm_tree(OCSD_DFRMTR_FRAME_MEM_ALIGN);
        feed(t, 4096);
        ocsd_destroy_dcd_tree(t);
    } else if (!strcmp(c, "stdio")) {
        /* 19: library text and the program's printf, in order. */
        ocsd_def_errlog_init(OCSD_ERR_SEV_ERROR, 1);
        ocsd_def_errlog_config_output(C_API_MSGLOGOUT_FLG_STDOUT | C_API_MSGLOGOUT_FLG_STDERR, NULL);
        printf("  before\n");
        fprintf(stderr, "  before (stderr)\n");
        ocsd_def_errlog_msgout("  message\n");
        dcd_tree_handle_t t = etm_tree(OCSD_DFRMTR_FRAME_MEM_ALIGN);
        feed(t, 4096);
        printf("  after\n");
        fprintf(stderr, "  after (stderr)\n");
        ocsd_destroy_dcd_tree(t);
    } else if (!strcmp(c, "wait_last")) {
        /* 18: the element callback answers WAIT on the last element (end
         * of trace); the packet monitor still sees the end of trace. */
        dcd_tree_handle_t t = etm_tree(OCSD_DFRMTR_FRAME_MEM_ALIGN);
        ocsd_dt_add_callback_mem_acc(t, 0, ~0ULL, OCSD_MEM_SPACE_ANY, mem_cb, NULL);
        ocsd_dt_attach_packet_callback(t, 0x15, OCSD_C_API_CB_PKT_MON, (void *)mon_cb, NULL);
        elem_resp = OCSD_RESP_WAIT;
        feed(t, 4096);
        printf("  elements %d; monitor: data %d eot %d flush %d reset %d\n", n_elems, mon_ops[0], mon_ops[1],
               mon_ops[2], mon_ops[3]);
        ocsd_destroy_dcd_tree(t);
    } else if (!strcmp(c, "ctxt_32is1")) {
        /* 21: an I_ADDR_CTXT_L_32IS1 packet through the packet printer. */
        static const unsigned char pkts[] = {
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, /* I_ASYNC */
            0x01, 0x00,                            /* I_TRACE_INFO */
            0x83, 0x01, 0x9a, 0x4f, 0x00, 0x00,    /* I_ADDR_CTXT_L_32IS1 */
        };
        uint32_t used = 0;
        dcd_tree_handle_t t = ocsd_create_dcd_tree(OCSD_TRC_SRC_SINGLE, 0);
        ocsd_dt_create_decoder(t, OCSD_BUILTIN_DCD_ETMV4I, OCSD_CREATE_FLG_PACKET_PROC, &cfg, &csid);
        ocsd_dt_attach_packet_callback(t, csid, OCSD_C_API_CB_PKT_SINK, (void *)pkt_cb, NULL);
        ocsd_dt_process_data(t, OCSD_OP_DATA, 0, sizeof pkts, pkts, &used);
        ocsd_dt_process_data(t, OCSD_OP_EOT, 0, 0, NULL, NULL);
        ocsd_destroy_dcd_tree(t);
    } else {
        printf("  no such case\n");
    }
}

static const char *cases[] = {
    "no_mem_acc", "mem_align", "log_ranges", "flags_0", "null_csid", "bad_src_type", "stats_unknown_id",
    "remove_mem_acc_first", "config_output_first", "mem_cb_more", "err_str", "wait_last", "ctxt_32is1",
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: api_diffs <etmv4-a64 snapshot dir> [case]\n");
        return 2;
    }
    dir = argv[1];
    trace_len = read_file("trace.bin", trace, sizeof trace);
    code0_len = read_file("code0.bin", code0, sizeof code0);
    code1_len = read_file("code1.bin", code1, sizeof code1);
    if (argc > 2) {
        printf("%s:\n", argv[2]);
        run(argv[2]);
        return 0;
    }
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        printf("%s:\n", cases[i]);
        fflush(stdout);
        pid_t p = fork();
        if (p == 0) {
            run(cases[i]);
            fflush(stdout);
            _exit(0);
        }
        int st = 0;
        waitpid(p, &st, 0);
        if (!WIFEXITED(st))
            printf("  crashed (signal %d)\n", WTERMSIG(st));
    }
    return 0;
}
