/* The build's version string. */
#ifndef SERVER_VERSION_H
#define SERVER_VERSION_H

#define LLAMAPI_VERSION "0.1.0"

#endif
