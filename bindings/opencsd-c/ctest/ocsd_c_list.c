/* Decodes a snapshot through OpenCSD's C API and prints the packet and
 * element lines with the library's own printers, as trc_pkt_lister
 * -decode lists them.
 *
 * Built against OpenCSD's installed headers (Debian's libopencsd-dev) and
 * linked with whichever libopencsd_c_api.so.1 the loader finds. The
 * snapshot arrives pre-digested as a manifest (see
 * src/bin/ocsd_snapshot_manifest.rs) so this program needs no ini parser.
 *
 * usage: ocsd_c_list <manifest> [-noprint | -pkts | -rmdcd | -rmmem]
 *   -noprint: decode with an element callback that only counts (speed).
 *   -pkts:    packet processing only, each packet through a packet
 *             callback (the protocol's packet struct) printed with
 *             ocsd_pkt_str, as trc_pkt_lister lists packets without
 *             -decode.
 *   -rmdcd:   ocsd_dt_remove_decoder on the first decoder before the
 *             decode (its lines go; the others' stay as they were).
 *   -rmmem:   ocsd_dt_remove_mem_acc on every image, by an address inside
 *             it, before the decode.
 *   Both print the calls' return codes as "# " lines first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <opencsd/c_api/opencsd_c_api.h>

static unsigned long long n_elems;

static void print_str(const void *ctx, const char *msg, const int len)
{
    (void)ctx;
    fwrite(msg, 1, (size_t)len, stdout);
}

static ocsd_datapath_resp_t count_elem(const void *ctx, const ocsd_trc_index_t idx,
                                       const uint8_t id, const ocsd_generic_trace_elem *e)
{
    (void)ctx; (void)idx; (void)id; (void)e;
    n_elems++;
    return OCSD_RESP_CONT;
}

/* What a packet callback is given as context: the decoder's protocol and
 * trace ID. */
struct pkt_ctx {
    int protocol;
    unsigned char csid;
};

static ocsd_datapath_resp_t print_pkt(const void *ctx, const ocsd_datapath_op_t op,
                                      const ocsd_trc_index_t idx, const void *pkt)
{
    const struct pkt_ctx *c = ctx;
    char text[1024];
    if (op != OCSD_OP_DATA || pkt == NULL)
        return OCSD_RESP_CONT;
    if (ocsd_pkt_str((ocsd_trace_protocol_t)c->protocol, pkt, text, (int)sizeof text) != OCSD_OK)
        strcpy(text, "(ocsd_pkt_str failed)");
    printf("Idx:%llu; ID:%x;\t%s\n", (unsigned long long)idx, c->csid, text);
    return OCSD_RESP_CONT;
}

static unsigned char *read_all(char **files, int n, size_t *len)
{
    unsigned char *buf = NULL;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        FILE *f = fopen(files[i], "rb");
        if (!f) { perror(files[i]); exit(1); }
        fseek(f, 0, SEEK_END);
        long sz = ftell(f);
        fseek(f, 0, SEEK_SET);
        buf = realloc(buf, total + (size_t)sz);
        if (fread(buf + total, 1, (size_t)sz, f) != (size_t)sz) { perror(files[i]); exit(1); }
        total += (size_t)sz;
        fclose(f);
    }
    *len = total;
    return buf;
}

#define MAXW 64

static int split(char *line, char **w)
{
    int n = 0;
    for (char *t = strtok(line, " \t\n"); t && n < MAXW; t = strtok(NULL, " \t\n"))
        w[n++] = t;
    return n;
}

static uint32_t num(const char *s) { return (uint32_t)strtoull(s, NULL, 0); }

int main(int argc, char **argv)
{
    if (argc < 2) { fprintf(stderr, "usage: ocsd_c_list <manifest> [-noprint]\n"); return 2; }
    int print = !(argc > 2 && strcmp(argv[2], "-noprint") == 0);
    int pkts = argc > 2 && strcmp(argv[2], "-pkts") == 0;
    int rmdcd = argc > 2 && strcmp(argv[2], "-rmdcd") == 0;
    int rmmem = argc > 2 && strcmp(argv[2], "-rmmem") == 0;
    int first_csid = -1;
    struct { ocsd_vaddr_t at; int space; } images[64];
    int n_images = 0;
    struct pkt_ctx pctx[128];
    int n_pctx = 0;
    FILE *m = fopen(argv[1], "r");
    if (!m) { perror(argv[1]); return 2; }

    dcd_tree_handle_t tree = C_API_INVALID_TREE_HANDLE;
    int single = 0;
    unsigned char *trace = NULL;
    size_t trace_len = 0;
    char line[8192];
    char *w[MAXW];
    int rc = 0;

    while (fgets(line, sizeof line, m)) {
        int n = split(line, w);
        if (n == 0)
            continue;
        if (strcmp(w[0], "buffer") == 0 && n >= 4) {
            single = strcmp(w[1], "single") == 0;
            tree = ocsd_create_dcd_tree(single ? OCSD_TRC_SRC_SINGLE : OCSD_TRC_SRC_FRAME_FORMATTED,
                                        single ? 0 : num(w[2]));
            if (tree == C_API_INVALID_TREE_HANDLE) { fprintf(stderr, "tree creation failed\n"); return 1; }
            ocsd_def_errlog_init(OCSD_ERR_SEV_ERROR, 1);
            ocsd_def_errlog_config_output(C_API_MSGLOGOUT_FLG_NONE, NULL);
            /* Text goes to stdout through the print callback; a decode
             * that prints nothing (-noprint) leaves it unset, as perf's
             * decode does. */
            if (print)
                ocsd_def_errlog_set_strprint_cb(tree, NULL, print_str);
            trace = read_all(&w[3], n - 3, &trace_len);
        } else if (strcmp(w[0], "decoder") == 0 && n >= 2) {
            unsigned char csid = 0;
            ocsd_err_t err = OCSD_ERR_NO_PROTOCOL;
            int flags = pkts ? OCSD_CREATE_FLG_PACKET_PROC : OCSD_CREATE_FLG_FULL_DECODER;
            int protocol = OCSD_PROTOCOL_UNKNOWN;
            if (strcmp(w[1], "ETMV4I") == 0 && n == 15) {
                ocsd_etmv4_cfg c = {0};
                c.reg_idr0 = num(w[2]); c.reg_idr1 = num(w[3]); c.reg_idr2 = num(w[4]);
                c.reg_idr8 = num(w[5]); c.reg_idr9 = num(w[6]); c.reg_idr10 = num(w[7]);
                c.reg_idr11 = num(w[8]); c.reg_idr12 = num(w[9]); c.reg_idr13 = num(w[10]);
                c.reg_configr = num(w[11]); c.reg_traceidr = num(w[12]);
                c.arch_ver = (ocsd_arch_version_t)num(w[13]); c.core_prof = (ocsd_core_profile_t)num(w[14]);
                err = ocsd_dt_create_decoder(tree, OCSD_BUILTIN_DCD_ETMV4I, flags, &c, &csid);
                protocol = OCSD_PROTOCOL_ETMV4I;
            } else if (strcmp(w[1], "ETE") == 0 && n == 11) {
                ocsd_ete_cfg c = {0};
                c.reg_idr0 = num(w[2]); c.reg_idr1 = num(w[3]); c.reg_idr2 = num(w[4]);
                c.reg_idr8 = num(w[5]); c.reg_devarch = num(w[6]); c.reg_configr = num(w[7]);
                c.reg_traceidr = num(w[8]);
                c.arch_ver = (ocsd_arch_version_t)num(w[9]); c.core_prof = (ocsd_core_profile_t)num(w[10]);
                err = ocsd_dt_create_decoder(tree, OCSD_BUILTIN_DCD_ETE, flags, &c, &csid);
                protocol = OCSD_PROTOCOL_ETE;
            } else if (strcmp(w[1], "ETMV3") == 0 && n == 8) {
                ocsd_etmv3_cfg c = {0};
                c.reg_idr = num(w[2]); c.reg_ctrl = num(w[3]); c.reg_ccer = num(w[4]);
                c.reg_trc_id = num(w[5]);
                c.arch_ver = (ocsd_arch_version_t)num(w[6]); c.core_prof = (ocsd_core_profile_t)num(w[7]);
                err = ocsd_dt_create_decoder(tree, OCSD_BUILTIN_DCD_ETMV3, flags, &c, &csid);
                protocol = OCSD_PROTOCOL_ETMV3;
            } else if (strcmp(w[1], "PTM") == 0 && n == 8) {
                ocsd_ptm_cfg c = {0};
                c.reg_idr = num(w[2]); c.reg_ctrl = num(w[3]); c.reg_ccer = num(w[4]);
                c.reg_trc_id = num(w[5]);
                c.arch_ver = (ocsd_arch_version_t)num(w[6]); c.core_prof = (ocsd_core_profile_t)num(w[7]);
                err = ocsd_dt_create_decoder(tree, OCSD_BUILTIN_DCD_PTM, flags, &c, &csid);
                protocol = OCSD_PROTOCOL_PTM;
            } else if (strcmp(w[1], "ITM") == 0 && n == 3) {
                /* OpenCSD 1.3 has no ITM decoder, so its headers have no
                 * config struct; 1.8's is this one register. */
                struct { uint32_t reg_tcr; } c = { num(w[2]) };
                err = ocsd_dt_create_decoder(tree, "ITM", flags, &c, &csid);
                protocol = 7; /* OCSD_PROTOCOL_ITM in 1.8 */
            } else if (strcmp(w[1], "STM") == 0 && n == 8) {
                ocsd_stm_cfg c = {0};
                c.reg_tcsr = num(w[2]);
                err = ocsd_dt_create_decoder(tree, OCSD_BUILTIN_DCD_STM, flags, &c, &csid);
                protocol = OCSD_PROTOCOL_STM;
            }
            if (err != OCSD_OK) {
                fprintf(stderr, "decoder %s not created: error %d\n", w[1], (int)err);
                rc = 1;
                continue;
            }
            if (first_csid < 0)
                first_csid = csid;
            if (pkts && n_pctx < 128) {
                pctx[n_pctx].protocol = protocol;
                /* A single-source tree holds its decoder in slot 0, which
                 * is how trc_pkt_lister labels its packets. */
                pctx[n_pctx].csid = single ? 0 : csid;
                if (ocsd_dt_attach_packet_callback(tree, csid, OCSD_C_API_CB_PKT_SINK, (void *)print_pkt,
                                                   &pctx[n_pctx]) != OCSD_OK) {
                    fprintf(stderr, "packet callback not attached to 0x%x\n", csid);
                    rc = 1;
                }
                n_pctx++;
            } else if (print)
                /* trc_pkt_lister names a single-source tree's decoder by
                 * its slot, 0. */
                ocsd_dt_set_pkt_protocol_printer(tree, single ? 0 : csid, 1);
        } else if (strcmp(w[0], "mem") == 0 && n == 6) {
            ocsd_file_mem_region_t r;
            r.start_address = strtoull(w[2], NULL, 0);
            r.file_offset = (size_t)strtoull(w[3], NULL, 0);
            r.region_size = (size_t)strtoull(w[4], NULL, 0);
            ocsd_err_t err = ocsd_dt_add_binfile_region_mem_acc(tree, &r, 1,
                                                                (ocsd_mem_space_acc_t)num(w[1]), w[5]);
            if (err != OCSD_OK)
                fprintf(stderr, "memory %s not mapped: error %d\n", w[5], (int)err);
            else if (n_images < 64) {
                /* An address inside the image, not its start: OpenCSD
                 * removes the image holding the address. */
                images[n_images].at = r.start_address + r.region_size / 2;
                images[n_images].space = (int)num(w[1]);
                n_images++;
            }
        }
    }
    fclose(m);
    if (tree == C_API_INVALID_TREE_HANDLE) { fprintf(stderr, "no buffer in manifest\n"); return 1; }

    if (rmdcd && first_csid >= 0) {
        printf("# remove decoder 0x%x: %d\n", first_csid, (int)ocsd_dt_remove_decoder(tree, (unsigned char)first_csid));
        /* Nothing there now: no error, as OpenCSD. */
        printf("# remove it again: %d\n", (int)ocsd_dt_remove_decoder(tree, (unsigned char)first_csid));
        if (!single)
            printf("# remove decoder 0x80: %d\n", (int)ocsd_dt_remove_decoder(tree, 0x80));
    }
    if (rmmem) {
        for (int i = 0; i < n_images; i++) {
            ocsd_err_t e = ocsd_dt_remove_mem_acc(tree, images[i].at, (ocsd_mem_space_acc_t)images[i].space);
            /* A file mapped in several regions is one image: the first
             * address of it removes it and the rest find nothing. */
            printf("# remove image at 0x%llx: %d\n", (unsigned long long)images[i].at, (int)e);
        }
        if (n_images > 0)
            printf("# remove again: %d\n", (int)ocsd_dt_remove_mem_acc(tree, images[0].at,
                                                                      (ocsd_mem_space_acc_t)images[0].space));
        ocsd_tl_log_mapped_mem_ranges(tree);
    }

    if (pkts)
        ;
    else if (print)
        ocsd_dt_set_gen_elem_printer(tree);
    else
        ocsd_dt_set_gen_elem_outfn(tree, count_elem, NULL);

    /* The data path: hand the buffer over in blocks, flushing while the
     * tree asks to wait, stopping on a fatal response. */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t pos = 0;
    ocsd_datapath_resp_t resp = OCSD_RESP_CONT;
    while (pos < trace_len && !OCSD_DATA_RESP_IS_FATAL(resp)) {
        uint32_t used = 0;
        uint32_t block = (uint32_t)((trace_len - pos) > 4096 ? 4096 : (trace_len - pos));
        if (OCSD_DATA_RESP_IS_WAIT(resp))
            resp = ocsd_dt_process_data(tree, OCSD_OP_FLUSH, 0, 0, NULL, NULL);
        else {
            resp = ocsd_dt_process_data(tree, OCSD_OP_DATA, pos, block, trace + pos, &used);
            pos += used;
        }
    }
    if (!OCSD_DATA_RESP_IS_FATAL(resp))
        ocsd_dt_process_data(tree, OCSD_OP_EOT, 0, 0, NULL, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!print)
        fprintf(stderr, "%llu elements, decode %.6f s\n", n_elems,
                (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);

    ocsd_destroy_dcd_tree(tree);
    free(trace);
    fflush(stdout);
    return rc;
}
