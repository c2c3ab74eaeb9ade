/* A custom decoder registered through the C API: "ECHO" turns each trace
 * byte into one packet (the byte) and one generic element (a cycle count
 * element carrying the byte). Checks registration, the protocol ID, the
 * packet sink callback, ocsd_pkt_str / ocsd_cust_protocol_to_str through
 * the decoder's own printer, and the element output; prints what it saw.
 * Exits 0 when everything matched.
 *
 * usage: custom_echo
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <opencsd/c_api/opencsd_c_api.h>

struct echo_cfg { unsigned char csid; };

struct echo_dcd {
    ocsd_extern_dcd_cb_fns cb;
    int pkt_flags;
};

static ocsd_datapath_resp_t echo_data_in(const void *h, const ocsd_datapath_op_t op,
                                         const ocsd_trc_index_t index, const uint32_t size,
                                         const uint8_t *data, uint32_t *used)
{
    struct echo_dcd *d = (struct echo_dcd *)h;
    ocsd_datapath_resp_t r = OCSD_RESP_CONT;
    if (op != OCSD_OP_DATA) {
        if (used)
            *used = 0;
        return OCSD_RESP_CONT;
    }
    uint32_t i;
    for (i = 0; i < size && OCSD_DATA_RESP_IS_CONT(r); i++) {
        uint8_t pkt = data[i];
        if (d->pkt_flags & OCSD_CUST_DCD_PKT_CB_USE_SINK)
            r = d->cb.fn_packet_data_sink(d->cb.lib_context, OCSD_OP_DATA, index + i, &pkt);
        ocsd_generic_trace_elem e;
        ocsd_gen_elem_init(&e, OCSD_GEN_TRC_ELEM_CYCLE_COUNT);
        e.cycle_count = pkt;
        e.has_cc = 1;
        r = d->cb.fn_gen_elem_out(d->cb.lib_context, index + i, 0x11, &e);
    }
    *used = i;
    return r;
}

static void echo_update_flags(const void *h, const int flags)
{
    ((struct echo_dcd *)h)->pkt_flags = flags;
}

static ocsd_err_t echo_create(const int flags, const void *cfg, const ocsd_extern_dcd_cb_fns *cb,
                              ocsd_extern_dcd_inst_t *inst)
{
    (void)flags;
    struct echo_dcd *d = calloc(1, sizeof *d);
    if (!d)
        return OCSD_ERR_MEM;
    d->cb = *cb;
    d->pkt_flags = cb->packetCBFlags;
    inst->fn_data_in = echo_data_in;
    inst->fn_update_pkt_mon = echo_update_flags;
    inst->decoder_handle = d;
    inst->p_decoder_name = "ECHO";
    inst->cs_id = ((const struct echo_cfg *)cfg)->csid;
    return OCSD_OK;
}

static ocsd_err_t echo_destroy(const void *h)
{
    free((void *)h);
    return OCSD_OK;
}

static ocsd_err_t echo_csid(const void *cfg, unsigned char *csid)
{
    *csid = ((const struct echo_cfg *)cfg)->csid;
    return OCSD_OK;
}

static ocsd_err_t echo_pkt_str(const void *pkt, char *buf, const int len)
{
    snprintf(buf, (size_t)len, "ECHO 0x%02x", *(const uint8_t *)pkt);
    return OCSD_OK;
}

static ocsd_extern_dcd_fact_t fact = { echo_create, echo_destroy, echo_csid, echo_pkt_str, OCSD_PROTOCOL_UNKNOWN };

static int n_pkts, n_elems, bad;

static ocsd_datapath_resp_t on_pkt(const void *ctx, const ocsd_datapath_op_t op,
                                   const ocsd_trc_index_t idx, const void *pkt)
{
    (void)ctx;
    char s[64], s2[64];
    if (op != OCSD_OP_DATA)
        return OCSD_RESP_CONT;
    ocsd_pkt_str(fact.protocol_id, pkt, s, sizeof s);
    ocsd_cust_protocol_to_str(fact.protocol_id, pkt, s2, sizeof s2);
    printf("Idx:%llu; packet %s\n", (unsigned long long)idx, s);
    if (strcmp(s, s2) != 0)
        bad++;
    n_pkts++;
    return OCSD_RESP_CONT;
}

static ocsd_datapath_resp_t on_elem(const void *ctx, const ocsd_trc_index_t idx, const uint8_t id,
                                    const ocsd_generic_trace_elem *e)
{
    (void)ctx;
    char s[256];
    ocsd_gen_elem_str(e, s, sizeof s);
    printf("Idx:%llu; ID:%x; %s\n", (unsigned long long)idx, id, s);
    if (e->elem_type != OCSD_GEN_TRC_ELEM_CYCLE_COUNT)
        bad++;
    n_elems++;
    return OCSD_RESP_CONT;
}

int main(void)
{
    if (ocsd_register_custom_decoder("ECHO", &fact) != OCSD_OK) { fprintf(stderr, "register failed\n"); return 1; }
    if (ocsd_register_custom_decoder("ECHO", &fact) != OCSD_ERR_DCDREG_NAME_REPEAT) bad++;
    printf("ECHO registered as protocol %d\n", (int)fact.protocol_id);
    if (fact.protocol_id != OCSD_PROTOCOL_CUSTOM_0) bad++;

    dcd_tree_handle_t t = ocsd_create_dcd_tree(OCSD_TRC_SRC_SINGLE, 0);
    struct echo_cfg cfg = { 0x11 };
    unsigned char csid = 0;
    if (ocsd_dt_create_decoder(t, "ECHO", OCSD_CREATE_FLG_PACKET_PROC, &cfg, &csid) != OCSD_OK || csid != 0x11) {
        fprintf(stderr, "create failed\n");
        return 1;
    }
    if (ocsd_dt_attach_packet_callback(t, csid, OCSD_C_API_CB_PKT_SINK, (void *)on_pkt, NULL) != OCSD_OK) bad++;
    ocsd_dt_set_gen_elem_outfn(t, on_elem, NULL);
    const uint8_t data[] = { 0x01, 0x02, 0xfe };
    uint32_t used = 0;
    ocsd_dt_process_data(t, OCSD_OP_DATA, 0, sizeof data, data, &used);
    ocsd_dt_process_data(t, OCSD_OP_EOT, 0, 0, NULL, NULL);
    ocsd_destroy_dcd_tree(t);
    ocsd_deregister_decoders();
    if (used != sizeof data || n_pkts != 3 || n_elems != 3) bad++;
    printf("%d packets, %d elements, %s\n", n_pkts, n_elems, bad ? "FAILED" : "ok");
    return bad ? 1 : 0;
}
