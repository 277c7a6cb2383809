/* Kubelet protobuf messages (DRA v1/v1beta1, registration, health): any bytes
 * either fail to decode or decode to a message that re-encodes with the size
 * it announced; when that encoding decodes again, it is a fixed point. (It
 * may not: protobuf-c keeps a non-canonical field-0 key as an unknown field
 * and re-encodes it in the canonical form it then refuses; see the corpus
 * file field0-unknown.) The first byte picks the message type. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kubelet_dra_health_v1alpha1.pb-c.h"
#include "kubelet_dra_v1.pb-c.h"
#include "kubelet_dra_v1beta1.pb-c.h"
#include "kubelet_pluginregistration.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const ProtobufCMessageDescriptor *const types[] = {
	&k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__descriptor,
	&k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_request__descriptor,
	&k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__descriptor,
	&k8s__io__kubelet__pkg__apis__dra__v1beta1__node_prepare_resources_request__descriptor,
	&k8s__io__kubelet__pkg__apis__dra__v1beta1__node_unprepare_resources_response__descriptor,
	&pluginregistration__registration_status__descriptor,
	&pluginregistration__plugin_info__descriptor,
	&v1alpha1__node_watch_resources_response__descriptor,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const ProtobufCMessageDescriptor *d;
	ProtobufCMessage *m, *m2;
	uint8_t *a, *b;
	size_t na, nb;

	if (size < 1)
		return 0;
	d = types[data[0] % (sizeof(types) / sizeof(types[0]))];
	m = protobuf_c_message_unpack(d, NULL, size - 1, data + 1);
	if (!m)
		return 0;
	na = protobuf_c_message_get_packed_size(m);
	a = malloc(na + 1);
	assert(a);
	assert(protobuf_c_message_pack(m, a) == na);
	m2 = protobuf_c_message_unpack(d, NULL, na, a);
	if (!m2) {
		free(a);
		protobuf_c_message_free_unpacked(m, NULL);
		return 0;
	}
	nb = protobuf_c_message_get_packed_size(m2);
	b = malloc(nb + 1);
	assert(b);
	assert(protobuf_c_message_pack(m2, b) == nb);
	assert(na == nb && memcmp(a, b, na) == 0);
	free(a);
	free(b);
	protobuf_c_message_free_unpacked(m, NULL);
	protobuf_c_message_free_unpacked(m2, NULL);
	return 0;
}
